"""State of one ``pytest --perfgate`` session: settings, where things go, the results so far,
and the reports written at the end (results JSON, Markdown, terminal table)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from perfgate.analysis.compare import NO_BASELINE, Comparison, sample_median
from perfgate.config import Settings, load_settings
from perfgate.errors import PerfgateError
from perfgate.runs import RESULTS_FORMAT, RESULTS_FORMAT_VERSION


@dataclass
class BenchmarkResult:
    """One benchmark's record (the baseline-shaped dict) and its comparison, if any."""

    record: dict[str, Any]
    comparison: Comparison | None
    recorded: Path | None = None


@dataclass
class PerfgateSession:
    settings: Settings
    rootdir: Path
    out_dir: Path
    json_path: Path
    md_path: Path
    profiler: str
    update: bool
    allow_dirty: bool
    strict: bool
    baseline_ref: str | None
    commit: dict[str, Any] = field(default_factory=dict)
    results: list[BenchmarkResult] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # benchmark name → test node id

    @classmethod
    def from_config(cls, config: pytest.Config) -> PerfgateSession:
        rootdir = Path(config.rootpath)
        config_file = config.getoption("perfgate_config") or config.getini("perfgate_config")
        settings = load_settings(config_file or None, root=rootdir)
        out_dir = Path(config.getoption("perfgate_out") or config.getini("perfgate_out"))
        if not out_dir.is_absolute():
            out_dir = rootdir / out_dir
        strict_option = config.getoption("perfgate_strict")
        profiler = (
            config.getoption("perfgate_profiler")
            or str(config.getini("perfgate_profiler") or "")
            or settings.profiler
        )
        json_option = config.getoption("perfgate_json")
        md_option = config.getoption("perfgate_md")
        session = cls(
            settings=settings,
            rootdir=rootdir,
            out_dir=out_dir,
            json_path=Path(json_option) if json_option else out_dir / "results.json",
            md_path=Path(md_option) if md_option else out_dir / "summary.md",
            profiler=profiler,
            update=bool(config.getoption("perfgate_update")),
            allow_dirty=bool(config.getoption("perfgate_allow_dirty")),
            strict=bool(
                strict_option if strict_option is not None else config.getini("perfgate_strict")
            ),
            baseline_ref=config.getoption("perfgate_baseline_ref"),
        )
        session.commit = session._commit_info()
        if session.baseline_ref:
            from perfgate.store.git import resolve

            resolve(rootdir, session.baseline_ref)  # an unknown ref is a usage error, now
        if session.update and session.commit.get("dirty") and not session.allow_dirty:
            raise PerfgateError(
                f"{rootdir}: the working tree has uncommitted changes, so HEAD "
                f"{str(session.commit['commit'])[:12]} is not what would be measured; commit "
                "them, or pass --perfgate-allow-dirty to record baselines marked dirty"
            )
        return session

    def _commit_info(self) -> dict[str, Any]:
        from perfgate.store.git import current_commit

        try:
            info = current_commit(self.rootdir)
        except PerfgateError:
            return {}
        return {"commit": info.sha, "branch": info.branch, "dirty": info.dirty}

    def register_name(self, name: str, nodeid: str) -> None:
        """Benchmark names are baseline paths: two tests may not share one."""
        other = self.names.get(name)
        if other is not None and other != nodeid:
            raise PerfgateError(
                f"benchmark name {name!r} is used by {other} and {nodeid}; give one of them "
                "@pytest.mark.perfgate(name=...)"
            )
        self.names[name] = nodeid

    def profile_dir(self, name: str) -> Path:
        path = self.out_dir / "profiles" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------------ reports

    def results_document(self) -> dict[str, Any]:
        runs = []
        for result in self.results:
            run = dict(result.record)
            if result.comparison is not None:
                run["verdict"] = result.comparison.verdict
                run["comparison"] = result.comparison.as_dict(top_operators=10)
            elif result.recorded is not None:
                run["verdict"] = "recorded"
                run["baseline_path"] = str(result.recorded)
            runs.append(run)
        return {
            "format": RESULTS_FORMAT,
            "format_version": RESULTS_FORMAT_VERSION,
            "commit": self.commit.get("commit"),
            "branch": self.commit.get("branch"),
            "dirty": self.commit.get("dirty"),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "runs": runs,
        }

    def markdown(self) -> str:
        from perfgate.report.compare import render_markdown

        comparisons = [r.comparison for r in self.results if r.comparison is not None]
        parts = [render_markdown(comparisons)] if comparisons else []
        recorded = [r for r in self.results if r.recorded is not None]
        if recorded:
            parts.append("### perfgate: baselines recorded\n")
            parts.extend(
                f"- `{r.record['benchmark']}` on `{r.record['env']}`: `{r.recorded}`"
                for r in recorded
            )
            parts.append("")
        return "\n".join(parts) + ("\n" if parts else "")

    # ------------------------------------------------------------------ xdist

    @property
    def partial_dir(self) -> Path:
        return self.out_dir / ".workers"

    def clear_partials(self) -> None:
        """The controller starts with no worker results from an earlier session."""
        if self.partial_dir.is_dir():
            for path in self.partial_dir.glob("*.json"):
                path.unlink()

    def write_partial(self, worker_id: str) -> None:
        """An xdist worker writes its results for the controller to merge."""
        if not self.results:
            return
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        payload = [
            {
                "record": r.record,
                "comparison": r.comparison.as_dict() if r.comparison is not None else None,
                "recorded": str(r.recorded) if r.recorded is not None else None,
            }
            for r in self.results
        ]
        target = self.partial_dir / f"{worker_id}.json"
        target.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")

    def merge_partials(self) -> None:
        from perfgate.analysis.compare import comparison_from_dict

        for path in sorted(self.partial_dir.glob("*.json")) if self.partial_dir.is_dir() else []:
            for item in json.loads(path.read_text(encoding="utf-8")):
                comparison = item.get("comparison")
                self.results.append(
                    BenchmarkResult(
                        record=item["record"],
                        comparison=comparison_from_dict(comparison) if comparison else None,
                        recorded=Path(item["recorded"]) if item.get("recorded") else None,
                    )
                )
            path.unlink()
        self.results.sort(key=lambda r: str(r.record.get("benchmark")))

    # ------------------------------------------------------------------ end of session

    def finish(self, terminalreporter: Any) -> None:
        """Write the results JSON and Markdown, and print the summary table."""
        self.merge_partials()
        if not self.results:
            return
        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        self.json_path.write_text(
            json.dumps(self.results_document(), indent=2, allow_nan=False) + "\n",
            encoding="utf-8",
        )
        markdown = self.markdown()
        self.md_path.parent.mkdir(parents=True, exist_ok=True)
        self.md_path.write_text(markdown, encoding="utf-8")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(markdown)
        write = terminalreporter.write_line
        terminalreporter.section("perfgate")
        for line in self.summary_table().splitlines():
            write(line)
        write(f"results: {self.json_path}")
        write(f"report:  {self.md_path}")
        if any(
            r.comparison is not None and r.comparison.verdict == NO_BASELINE for r in self.results
        ):
            write(
                "no baseline yet for some benchmarks on this runner: record them with "
                "`pytest --perfgate --perfgate-update` (on the baseline branch, clean tree)"
            )

    def summary_table(self) -> str:
        from tabulate import tabulate

        from perfgate.analysis.compare import format_value

        rows = []
        for result in self.results:
            samples = result.record.get("samples", {})
            comparison = result.comparison
            step = sample_median(samples.get("step_time_us", []))
            change = "—"
            baseline = "—"
            if comparison is not None:
                metric = next((m for m in comparison.metrics if m.name == "step_time"), None)
                if metric is not None and metric.change == metric.change:
                    change = (
                        f"{metric.change * 100:+.1f}%"
                        if metric.unit == "%"
                        else (f"{metric.change / 1e3:+.3f} ms")
                    )
                commit = comparison.baseline.get("commit")
                baseline = str(commit)[:12] if commit else "—"
            verdict = comparison.verdict if comparison is not None else "recorded"
            rows.append(
                [
                    result.record["benchmark"],
                    verdict.upper() if verdict in ("regression", "error") else verdict,
                    format_value("step_time_us", step),
                    change,
                    format_value("utilization", sample_median(samples.get("utilization", []))),
                    format_value("copy_ratio", sample_median(samples.get("copy_ratio", []))),
                    baseline,
                ]
            )
        return tabulate(
            rows,
            headers=[
                "benchmark",
                "verdict",
                "step time",
                "vs baseline",
                "utilization",
                "copy ratio",
                "baseline",
            ],
            disable_numparse=True,
        )


def benchmark_name(nodeid: str, originalname: str, callspec_id: str | None) -> str:
    """The default benchmark name of a test: its function name without ``test_``, plus
    its parameters, safe as a path component (``cnn_train``, ``cnn_train-bs32``)."""
    name = originalname[5:] if originalname.startswith("test_") else originalname
    if callspec_id:
        name = f"{name}-{callspec_id}"
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return cleaned or re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid).strip("-.")
