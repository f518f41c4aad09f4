"""Merge the results files of benchmark shards into one, so one job can gate them all.

``python -m perfgate.action.merge_results -o merged.json [--md merged.md] SHARD.json ...``

Every shard must have measured the same commit, and no (benchmark, env) pair may appear in
two shards. The merged file is a ``perfgate.results`` v1 document: the shards' runs in the
order given, ``dirty`` when any shard was dirty. The Markdown is a table of every run's
verdict followed by each shard's own ``summary.md`` (the file next to its results).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.action import ERROR, REGRESSION, ActionError, run_main, write_text
from perfgate.errors import PerfgateError
from perfgate.records import RESULTS_FORMAT, RESULTS_FORMAT_VERSION, ResultsDocument
from perfgate.report import markdown as md
from perfgate.sides import load_results_file


def read_results(path: Path) -> ResultsDocument:
    """A results document, checked for the fields a merge relies on."""
    try:
        return load_results_file(path)
    except PerfgateError as exc:
        raise ActionError(str(exc)) from None


def merge(documents: Sequence[tuple[Path, ResultsDocument]]) -> dict[str, Any]:
    """One results document holding every shard's runs."""
    if not documents:
        raise ActionError("no results files to merge")
    commits = {str(doc["commit"]) for _, doc in documents if doc.get("commit")}
    if len(commits) > 1:
        listing = ", ".join(f"{path} at {str(doc.get('commit'))[:12]}" for path, doc in documents)
        raise ActionError(f"the shards measured different commits: {listing}")
    seen: dict[tuple[str, str], Path] = {}
    runs: list[Any] = []
    for path, document in documents:
        for run in document["runs"]:
            key = (str(run.get("benchmark")), str(run.get("env")))
            if key in seen:
                raise ActionError(
                    f"benchmark {key[0]!r} on {key[1]!r} is in both {seen[key]} and {path}: "
                    "each benchmark must run in exactly one shard"
                )
            seen[key] = path
            runs.append(run)
    return {
        "format": RESULTS_FORMAT,
        "format_version": RESULTS_FORMAT_VERSION,
        "commit": next(iter(commits), None),
        "branch": next((doc["branch"] for _, doc in documents if doc.get("branch")), None),
        "dirty": any(bool(doc.get("dirty")) for _, doc in documents),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        # Strict when every shard was (a shard's own job already failed on its strictness).
        "strict": all(doc.get("strict") is True for _, doc in documents),
        # The tests the shards that say so failed outside the gate (older shards do not).
        **(
            {
                "failed_elsewhere": [
                    f for _, doc in documents for f in doc.get("failed_elsewhere", [])
                ]
            }
            if any("failed_elsewhere" in doc for _, doc in documents)
            else {}
        ),
        "runs": runs,
    }


def merged_markdown(documents: Sequence[tuple[Path, ResultsDocument]]) -> str:
    """A verdict table over all shards, then each shard's own summary.md when it has one."""
    total = sum(len(doc["runs"]) for _, doc in documents)
    lines = [
        f"### perfgate: {total} benchmark{'s' if total != 1 else ''} "
        f"from {len(documents)} shard{'s' if len(documents) != 1 else ''}",
        "",
        "| benchmark | env | verdict | shard |",
        "|---|---|---|---|",
    ]
    for path, document in documents:
        for run in document["runs"]:
            verdict = str(run.get("verdict", "?"))
            shown = (
                f"**{verdict.upper()}**" if verdict in (REGRESSION, ERROR) else md.escape(verdict)
            )
            name, env = md.code(run.get("benchmark")), md.code(run.get("env"))
            lines.append(f"| {name} | {env} | {shown} | {md.code(path.parent.name)} |")
    lines.append("")
    for path, _ in documents:
        summary = path.with_name("summary.md")
        if summary.is_file():
            # The shard's own report, as the shard's perfgate rendered (and escaped) it.
            shard = md.code(path.parent.name)
            lines += [f"#### shard {shard}", "", summary.read_text("utf-8").rstrip()]
            lines.append("")
    return "\n".join(lines) + "\n"


def merge_files(paths: Sequence[Path], out_json: Path, out_md: Path | None) -> dict[str, Any]:
    """Read, merge and write; returns the merged document."""
    documents = [(path, read_results(path)) for path in paths]
    merged = merge(documents)
    write_text(out_json, json.dumps(merged, indent=2, allow_nan=False) + "\n")
    if out_md is not None:
        write_text(out_md, merged_markdown(documents))
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    """Merge the results files named on the command line."""
    parser = argparse.ArgumentParser(prog="python -m perfgate.action.merge_results")
    parser.add_argument("results", nargs="+", type=Path, help="the shards' results files")
    parser.add_argument("-o", "--output", type=Path, required=True, help="merged results file")
    parser.add_argument("--md", type=Path, help="also write a merged Markdown report here")
    args = parser.parse_args(argv)
    merged = merge_files(args.results, args.output, args.md)
    print(f"merged {len(merged['runs'])} runs from {len(args.results)} files into {args.output}")
    return 0


if __name__ == "__main__":
    run_main(main)
