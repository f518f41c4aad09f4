"""Verdicts and what they mean for a build: one rule for every door (pytest, CLI, action).

A benchmark's comparison ends in one :class:`Verdict`. Several benchmarks end in the worst of
theirs (:func:`worst`, by :data:`SEVERITY`). Whether a verdict fails the build is
:func:`fails`; the exit status of a gating command is :func:`exit_status`:

========  ==============================================================================
status    when
========  ==============================================================================
0         nothing failed: pass, improvement, recorded; also no-baseline, incomparable
          and unstable unless ``strict``
1         a benchmark regressed (or, with ``strict``, had no baseline, was incomparable or
          unstable)
2         a benchmark could not be judged (``error``): usage, configuration or data error
========  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Verdict(str, Enum):
    """The outcome of one benchmark (a ``str``: it is written to JSON as its value)."""

    PASS = "pass"
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_BASELINE = "no-baseline"
    INCOMPARABLE = "incomparable"
    UNSTABLE = "unstable"
    ERROR = "error"
    RECORDED = "recorded"  # --perfgate-update: a baseline was written, nothing compared

    def __str__(self) -> str:
        return self.value


class MetricStatus(str, Enum):
    """The judgement of one metric of a benchmark."""

    PASS = "pass"
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNSTABLE = "unstable"
    NOT_AVAILABLE = "n/a"  # a side has no samples of the metric

    def __str__(self) -> str:
        return self.value


# Worst first: the overall verdict of several benchmarks is the first of theirs here.
SEVERITY = (
    Verdict.ERROR,
    Verdict.REGRESSION,
    Verdict.UNSTABLE,
    Verdict.INCOMPARABLE,
    Verdict.NO_BASELINE,
    Verdict.IMPROVEMENT,
    Verdict.PASS,
    Verdict.RECORDED,
)
# Not a regression, but not a judgement either: they fail only under ``strict``.
UNDECIDED = frozenset({Verdict.NO_BASELINE, Verdict.INCOMPARABLE, Verdict.UNSTABLE})

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports a command that SIGINT ended


def parse_verdict(value: object, where: str) -> Verdict:
    """The :class:`Verdict` a JSON value names; a ``ValueError`` naming ``where`` otherwise."""
    try:
        return Verdict(str(value))
    except ValueError:
        allowed = ", ".join(v.value for v in Verdict)
        raise ValueError(
            f"{where}: {value!r} is not a verdict (expected one of {allowed})"
        ) from None


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe of ``verdicts``; ``no-baseline`` when there is none (nothing judged)."""
    return min(verdicts, key=SEVERITY.index, default=Verdict.NO_BASELINE)


def fails(verdict: Verdict, strict: bool) -> bool:
    """Whether ``verdict`` fails the build (a failed pytest test, a failed job)."""
    if verdict in (Verdict.ERROR, Verdict.REGRESSION):
        return True
    return strict and verdict in UNDECIDED


def exit_status(verdicts: Iterable[Verdict], strict: bool) -> int:
    """The exit status of a command that judged ``verdicts`` (see the module docstring)."""
    judged = list(verdicts)
    if Verdict.ERROR in judged:
        return EXIT_ERROR
    if any(fails(v, strict) for v in judged) or (strict and not judged):
        return EXIT_REGRESSION
    return EXIT_OK
