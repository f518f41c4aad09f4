"""The rules a benchmark is judged by, as plain data: thresholds and statistics.

Nothing here reads files: :mod:`perfgate.config` builds these objects from ``perfgate.yaml``
or ``[tool.perfgate]`` and validates them; the analysis only reads them.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum


class Unit(str, Enum):
    """How a threshold is measured."""

    RELATIVE = "%"  # of the baseline value
    POINTS = "pt"  # percentage points of a ratio metric (0..1 scaled to 0..100)
    MICROSECONDS = "us"  # absolute time


@dataclass(frozen=True)
class Threshold:
    """A limit on a metric's change in its bad direction, e.g. ``5%``, ``3pt``, ``2ms``."""

    value: float  # fraction for % and pt (0.05 = 5%), µs for times
    unit: Unit
    text: str

    def exceeded_by(self, baseline: float, current: float, bad_sign: int) -> bool:
        """Whether ``current`` moved past the limit in the bad direction (+1 up, -1 down)."""
        return self.change(baseline, current) * bad_sign > self.value

    def change(self, baseline: float, current: float) -> float:
        """The change in this threshold's unit (fraction for % and pt, µs for times)."""
        if self.unit is Unit.RELATIVE:
            if baseline:
                return (current - baseline) / baseline
            # From 0: no change is no change (a copy ratio of 0% both sides), any other is
            # an infinite relative one, in its direction.
            return math.copysign(math.inf, current - baseline) if current != baseline else 0.0
        return current - baseline

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class MetricSpec:
    """A gated metric: its sample column, its bad direction and how its limit is written."""

    label: str  # config key, e.g. step_time
    metric: str  # column name in the per-step samples, e.g. step_time_us
    bad_sign: int  # +1: higher is worse; -1: lower is worse
    limit_key: str  # max_increase | max_drop
    units: tuple[Unit, ...]  # units a limit may be written in
    default: Threshold
    gated_by_default: bool


METRICS: dict[str, MetricSpec] = {
    spec.label: spec
    for spec in (
        MetricSpec(
            "step_time",
            "step_time_us",
            +1,
            "max_increase",
            (Unit.RELATIVE, Unit.MICROSECONDS),
            Threshold(0.05, Unit.RELATIVE, "5%"),
            True,
        ),
        MetricSpec(
            "utilization",
            "utilization",
            -1,
            "max_drop",
            (Unit.POINTS, Unit.RELATIVE),
            Threshold(0.03, Unit.POINTS, "3pt"),
            True,
        ),
        MetricSpec(
            "copy_ratio",
            "copy_ratio",
            +1,
            "max_increase",
            (Unit.POINTS, Unit.RELATIVE),
            Threshold(0.02, Unit.POINTS, "2pt"),
            True,
        ),
        MetricSpec(
            "comm_ratio",
            "comm_ratio",
            +1,
            "max_increase",
            (Unit.POINTS, Unit.RELATIVE),
            Threshold(0.05, Unit.POINTS, "5pt"),
            False,
        ),
        MetricSpec(
            "free_ratio",
            "free_ratio",
            +1,
            "max_increase",
            (Unit.POINTS, Unit.RELATIVE),
            Threshold(0.05, Unit.POINTS, "5pt"),
            False,
        ),
    )
}


@dataclass(frozen=True)
class MetricRule:
    """How one metric is judged."""

    metric: str  # column name in the per-step samples, e.g. step_time_us
    label: str  # config key, e.g. step_time
    bad_sign: int  # +1: higher is worse; -1: lower is worse
    threshold: Threshold
    gate: bool = True


@dataclass(frozen=True)
class OperatorRule:
    max_increase: Threshold
    min_share: float  # fraction of the step an operator must hold to be gated
    gate: bool = False


@dataclass(frozen=True)
class Statistics:
    """How a benchmark is measured and judged.

    A run is ``rounds`` re-warmed rounds in one process; when they cannot decide, more
    rounds follow, ``rounds`` at a time, up to ``max_rounds`` (and ``max_seconds`` of
    measuring). A baseline is recorded in ``processes`` processes of ``rounds`` rounds each,
    so it carries the noise between processes too. The defaults come from measurements on
    a shared 2-vCPU runner (docs/verdict-quality.md).
    """

    alpha: float = 0.01
    min_steps: int = 10
    lookback: int = 8  # ancestor baselines of the same code that join the baseline side
    max_cv: float = 0.10  # a baseline noisier than this between rounds is re-measured
    rounds: int = 5
    max_rounds: int = 15
    processes: int = 3
    max_seconds: float = 120.0
    ab_pairs: int = 4  # base/tree process pairs of a same-runner A/B run
    # The spread of a whole session's level (the runner's day, its neighbours, clocks): what
    # one stored baseline cannot show. Assumed until 3 or more baselines of the same code
    # measure it: for times as a relative move, for ratios of the step (utilization, copy
    # ratio) as that move of one part of the step against the rest (session_prior). 20%: a
    # shared 2-vCPU VM moved a CPU step by -39%…+74% between sessions with CPU time = wall
    # time (docs/verdict-quality.md); lower it on a dedicated runner.
    session_noise: float = 0.20

    @property
    def looks(self) -> int:
        """How many times a comparison may look: after each batch of ``rounds``."""
        return max(1, -(-self.max_rounds // self.rounds))


@dataclass(frozen=True)
class Rules:
    """Everything one benchmark is judged by."""

    metrics: dict[str, MetricRule]
    operators: OperatorRule
    statistics: Statistics = field(default_factory=Statistics)

    @property
    def gated(self) -> list[MetricRule]:
        return [rule for rule in self.metrics.values() if rule.gate]


def default_rules() -> Rules:
    metrics = {
        label: MetricRule(
            metric=spec.metric,
            label=label,
            bad_sign=spec.bad_sign,
            threshold=spec.default,
            gate=spec.gated_by_default,
        )
        for label, spec in METRICS.items()
    }
    operators = OperatorRule(
        max_increase=Threshold(0.10, Unit.RELATIVE, "10%"), min_share=0.01, gate=False
    )
    return Rules(metrics=metrics, operators=operators)


PROFILERS = ("auto", "torch", "torch_npu", "msprof", "none")


@dataclass(frozen=True)
class MeasureSettings:
    """How the runner is quietened for the measured rounds: torch intra-op ``threads``
    (``auto``: 1 when the benchmark runs on the CPU, torch's own choice on an accelerator)
    and ``pin_cpu`` (pin the process to the least busy CPU; ``auto``: off — on a shared
    VM it bought no isolation), ``keep_memory`` (glibc's malloc keeps freed memory in the
    process instead of mapping and faulting it in again every step; ``auto``: on the CPU)."""

    threads: int | str = "auto"
    pin_cpu: bool | str = "auto"
    keep_memory: bool | str = "auto"


@dataclass(frozen=True)
class BaselineSettings:
    dir: str = "baselines"
    # None: the repository's default branch (perfgate.store.git.default_branch).
    branch: str | None = None
    max_depth: int = 50
    env: str = "auto"


ADVISOR_RULES = (
    "idle_gaps",
    "host_copies",
    "small_kernels",
    "sync_waits",
    "communication",
    "rank_imbalance",
    "ai_cpu",
    "low_utilization",
)


@dataclass(frozen=True)
class AdvisorSettings:
    """The advisor's thresholds (``advisor:`` in perfgate.yaml); the defaults are the field
    reports' (docs/advisor.md). Shares are fractions of the step time."""

    free_ratio: float = 0.15  # device free (idle) time per step
    copy_ratio: float = 0.25  # host↔device copy time per step
    small_kernel_us: float = 50.0  # a kernel shorter than this is small
    small_kernel_run: int = 8  # this many small kernels in a row, with launch gaps between
    sync_ratio: float = 0.05  # synchronisation waits on the critical path
    comm_ratio: float = 0.30  # communication not overlapped with compute
    imbalance: float = 0.05  # slowest rank over the median rank
    ai_cpu_share: float = 0.0  # AI_CPU operators holding more than this share of the step
    utilization: float = 0.60  # computing share of the step below this
    disable: tuple[str, ...] = ()  # rules switched off (ADVISOR_RULES)


@dataclass(frozen=True)
class Settings:
    """The validated configuration: default rules, per-benchmark rules, the store, the
    profiler. ``source`` names where it came from, for messages."""

    rules: Rules = field(default_factory=default_rules)
    baseline: BaselineSettings = field(default_factory=BaselineSettings)
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    advisor: AdvisorSettings = field(default_factory=AdvisorSettings)
    profiler: str = "auto"
    benchmarks: dict[str, Rules] = field(default_factory=dict)
    source: str = "defaults"

    def rules_for(self, benchmark: str) -> Rules:
        """The rules of ``benchmark``: its ``benchmarks.<name>`` overrides, else the defaults."""
        return self.benchmarks.get(benchmark, self.rules)

    def misnamed(self, run: Iterable[str]) -> list[str]:
        """A line for each ``benchmarks.<name>`` entry that names no benchmark of ``run`` but
        looks like the misspelt name of one without an entry: that benchmark is judged by
        the defaults, which its author did not mean. Entries for benchmarks simply not run
        (a subset of the suite) are not named."""
        run_names = set(run)
        by_folded = {name.casefold(): name for name in sorted(run_names - set(self.benchmarks))}
        lines = []
        for name in sorted(set(self.benchmarks) - run_names):
            close = difflib.get_close_matches(name.casefold(), by_folded, n=1, cutoff=0.8)
            if close:
                lines.append(
                    f"{self.source}: benchmarks.{name} names no benchmark of this run; did you "
                    f"mean {by_folded[close[0]]}? (that one has the default rules)"
                )
        return lines
