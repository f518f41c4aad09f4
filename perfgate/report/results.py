"""A session's results: the results file (``perfgate.results``), its Markdown report and the
terminal table ``pytest --perfgate`` ends with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.analysis.compare import Comparison, gated_value
from perfgate.records import RESULTS_FORMAT, RESULTS_FORMAT_VERSION, RunRecord
from perfgate.report import markdown as md
from perfgate.report.compare import comparison_dict, comparison_from_dict, render_markdown
from perfgate.report.explain import verdict_reasons
from perfgate.report.format import fitted_table, format_change, format_value, missing
from perfgate.verdict import Verdict

# Operators kept per comparison in a results file: enough to explain, small enough to read.
RESULTS_TOP_OPERATORS = 10


@dataclass
class BenchmarkResult:
    """One benchmark's run record and what became of it: compared, or recorded."""

    record: RunRecord
    comparison: Comparison | None = None
    recorded: Path | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    # What judged the run beyond the settings: the marker's ``thresholds`` and the
    # ``alpha_look`` of the deciding look (gate.judging_rules reads them back).
    judged_by: dict[str, Any] | None = None

    @property
    def verdict(self) -> Verdict:
        if self.comparison is not None:
            return self.comparison.verdict
        return Verdict.RECORDED if self.recorded is not None else Verdict.ERROR

    def as_dict(self, top_operators: int | None = None) -> dict[str, Any]:
        """This result as a run of a results file."""
        run: dict[str, Any] = dict(self.record)
        run["verdict"] = self.verdict.value
        if self.comparison is not None:
            run["comparison"] = comparison_dict(self.comparison, top_operators)
        if self.recorded is not None:
            run["baseline_path"] = str(self.recorded)
        if self.timings_s:
            run["timings_s"] = self.timings_s
        if self.judged_by is not None:
            run["judged_by"] = self.judged_by
        return run

    @classmethod
    def from_dict(cls, run: dict[str, Any]) -> BenchmarkResult:
        """The inverse of :meth:`as_dict` (xdist workers hand results over as JSON)."""
        record = {
            k: v
            for k, v in run.items()
            if k not in ("verdict", "comparison", "baseline_path", "timings_s", "judged_by")
        }
        comparison = run.get("comparison")
        recorded = run.get("baseline_path")
        return cls(
            record=record,  # type: ignore[arg-type]
            comparison=comparison_from_dict(comparison) if comparison else None,
            recorded=Path(recorded) if recorded else None,
            timings_s=dict(run.get("timings_s") or {}),
            judged_by=run.get("judged_by"),
        )


def results_document(
    results: Sequence[BenchmarkResult],
    commit: dict[str, Any],
    *,
    failed_elsewhere: Sequence[dict[str, str]] = (),
    strict: bool = False,
) -> dict[str, Any]:
    """The ``perfgate.results`` document of a session (``docs/json.md``): ``failed_elsewhere``,
    the tests pytest failed for other reasons than a benchmark's verdict; ``strict``, whether
    undecided verdicts failed their tests (``--perfgate-strict``)."""
    return {
        "format": RESULTS_FORMAT,
        "format_version": RESULTS_FORMAT_VERSION,
        "commit": commit.get("commit"),
        "branch": commit.get("branch"),
        "dirty": commit.get("dirty"),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "strict": strict,
        "failed_elsewhere": list(failed_elsewhere),
        "runs": [r.as_dict(top_operators=RESULTS_TOP_OPERATORS) for r in results],
    }


def results_markdown(results: Sequence[BenchmarkResult]) -> str:
    """The Markdown report of a session: the comparisons, then the baselines recorded."""
    comparisons = [r.comparison for r in results if r.comparison is not None]
    parts = [render_markdown(comparisons)] if comparisons else []
    recorded = [r for r in results if r.recorded is not None]
    if recorded:
        parts.append("### perfgate: baselines recorded\n")
        for r in recorded:
            parts.append(
                f"- {md.code(r.record['benchmark'])} on {md.code(r.record['env'])}: "
                f"{md.code(r.recorded)}"
            )
            parts.extend(f"  - ⚠️ {md.escape(note)}" for note in recording_warnings(r))
        parts.append("")
    return "\n".join(parts) + ("\n" if parts else "")


# What a recording says of itself (fixture.Benchmark._record_baseline): a baseline that
# stayed noisy, a measuring process that failed. The profile's reading notes stay in the file.
_RECORDING_WARNING = re.compile(r"baseline recorded with |process \d+ exited with ")


def recording_warnings(result: BenchmarkResult) -> list[str]:
    """The notes of a recorded baseline that its recorder must read: it is noisy, or fewer
    processes measured it than were asked for."""
    if result.recorded is None:
        return []
    return [n for n in result.record.get("notes", []) if _RECORDING_WARNING.match(n)]


_SUMMARY_HEADERS = [
    "benchmark",
    "verdict",
    "step time",
    "vs baseline",
    "utilization",
    "copy ratio",
    "baseline",
]


def summary_table(results: Sequence[BenchmarkResult]) -> str:
    """The terminal table ``pytest --perfgate`` ends with: one row per benchmark. Its values
    are the ones the comparison judges (the metric table's "current"), so that the step time
    and its change against the baseline are of the same measurement."""
    rows = []
    for result in results:
        comparison = result.comparison
        change = "—"
        baseline = "—"
        if comparison is not None:
            metric = next((m for m in comparison.metrics if m.name == "step_time"), None)
            if metric is not None:
                change = format_change(metric.change, metric.unit)
            commit = comparison.baseline.get("commit")
            baseline = str(commit)[:12] if commit else "—"
        verdict = result.verdict
        loud = verdict in (Verdict.REGRESSION, Verdict.ERROR)
        rows.append(
            [
                result.record["benchmark"],
                verdict.value.upper() if loud else verdict.value,
                format_value("step_time_us", _shown_value(result, "step_time_us")),
                change,
                format_value("utilization", _shown_value(result, "utilization")),
                format_value("copy_ratio", _shown_value(result, "copy_ratio")),
                baseline,
            ]
        )
    # Where the terminal is too narrow, the commit column is left out and its commits said
    # once, under the table.
    table, dropped = fitted_table(rows, _SUMMARY_HEADERS, optional=["baseline"])
    commits = [] if "baseline" not in dropped else _baseline_commits(rows)
    reasons = [
        reason
        for result in results
        if result.comparison is not None
        for reason in verdict_reasons(result.comparison)
    ]
    return "\n".join([table, *commits, *reasons, *busy_warnings(results)])


def _baseline_commits(rows: Sequence[Sequence[str]]) -> list[str]:
    """The summary table's baseline column as one line: the commit of all, or of each."""
    compared = [(row[0], row[-1]) for row in rows if row[-1] != "—"]
    if not compared:
        return []
    if len({commit for _, commit in compared}) == 1:
        return [f"baseline: {compared[0][1]}"]
    return ["baselines: " + ", ".join(f"{name} {commit}" for name, commit in compared)]


def _shown_value(result: BenchmarkResult, metric: str) -> float | None:
    """``metric`` as the comparison judged it (its current side), else as one would."""
    if result.comparison is not None:
        judged = next((m for m in result.comparison.metrics if m.metric == metric), None)
        if judged is not None and not missing(judged.current):
            return judged.current
    return gated_value(result.record, metric)


# Neighbours using this many CPUs while a benchmark ran: worth a warning.
BUSY_OTHERS_CPUS = 0.5


def busy_warnings(results: Sequence[BenchmarkResult]) -> list[str]:
    """One warning naming the benchmarks measured while other processes used the CPUs."""
    from perfgate.analysis.compare import others_cpus

    busy: list[str] = []
    worst, cpus = 0.0, "?"
    for result in results:
        others = others_cpus(result.record)
        if others is not None and others >= BUSY_OTHERS_CPUS:
            busy.append(result.record["benchmark"])
            if others >= worst:
                worst = others
                runner = result.record.get("runner")
                load = runner.get("load") if isinstance(runner, dict) else None
                cpus = str(load.get("cpus", "?")) if isinstance(load, dict) else "?"
    if not busy:
        return []
    return [
        f"warning: the runner was busy: other processes used up to {worst:.1f} of {cpus} "
        f"CPUs while {', '.join(busy)} ran; step times wander with them (a dedicated "
        "runner, or perfgate ab, gives firmer verdicts)"
    ]
