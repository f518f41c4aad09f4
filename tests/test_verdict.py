"""One rule from verdicts to a build's fate, for every door: every mix of verdicts, strict or
not, against an independent statement of the rule."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from perfgate.action import overall_verdict
from perfgate.cli import main
from perfgate.verdict import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REGRESSION,
    SEVERITY,
    Verdict,
    exit_status,
    fails,
    parse_verdict,
    worst,
)

JUDGED = [v for v in Verdict if v is not Verdict.RECORDED]
# Every multiset of up to two verdicts (and none), with and without --strict.
MIXES = [(), *((v,) for v in Verdict), *itertools.combinations_with_replacement(Verdict, 2)]


def expected_status(verdicts: tuple[Verdict, ...], strict: bool) -> int:
    """The rule as the README states it, written out longhand."""
    if "error" in verdicts:
        return 2
    if "regression" in verdicts:
        return 1
    undecided = {"no-baseline", "incomparable", "unstable"}
    if strict and (not verdicts or undecided & set(verdicts)):
        return 1
    return 0


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("verdicts", MIXES, ids=lambda mix: "+".join(mix) or "none")
def test_exit_status_of_every_mix(verdicts: tuple[Verdict, ...], strict: bool) -> None:
    assert exit_status(verdicts, strict) == expected_status(verdicts, strict)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("verdict", list(Verdict))
def test_a_single_verdict_fails_the_build_only_when_the_rule_says(
    verdict: Verdict, strict: bool
) -> None:
    assert fails(verdict, strict) == (expected_status((verdict,), strict) != EXIT_OK)


def test_the_worst_verdict_follows_the_severity_order() -> None:
    assert SEVERITY[0] is Verdict.ERROR
    assert set(SEVERITY) == set(Verdict)
    assert worst([Verdict.PASS, Verdict.ERROR, Verdict.REGRESSION]) is Verdict.ERROR
    assert worst([Verdict.IMPROVEMENT, Verdict.UNSTABLE]) is Verdict.UNSTABLE
    assert worst([]) is Verdict.NO_BASELINE


def test_verdicts_read_from_json_are_checked() -> None:
    assert parse_verdict("regression", "x") is Verdict.REGRESSION
    with pytest.raises(ValueError, match="x: 'regressed' is not a verdict"):
        parse_verdict("regressed", "x")


def _results_file(path: Path, verdicts: tuple[Verdict, ...]) -> Path:
    """A results file whose comparisons carry ``verdicts`` (nothing else needed to render)."""
    runs = [
        {
            "benchmark": f"b{i}",
            "env": "cpu-x86_64",
            "samples": {"step_time_us": [1.0]},
            "verdict": v.value,
            "comparison": {
                "benchmark": f"b{i}",
                "verdict": v.value,
                "baseline": {"commit": None},
                "current": {"commit": None},
            },
        }
        for i, v in enumerate(verdicts)
    ]
    path.write_text(json.dumps({"format": "perfgate.results", "format_version": 1, "runs": runs}))
    return path


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    "verdicts",
    [v for v in MIXES if v and Verdict.RECORDED not in v],
    ids=lambda mix: "+".join(mix),
)
def test_perfgate_report_exits_by_the_same_rule(
    tmp_path: Path,
    verdicts: tuple[Verdict, ...],
    strict: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = _results_file(tmp_path / "results.json", verdicts)
    status = main(["report", str(results), *(["--strict"] if strict else [])])
    capsys.readouterr()
    assert status == expected_status(verdicts, strict)


def test_perfgate_report_of_a_regression_and_an_error_is_an_error(tmp_path: Path) -> None:
    # Once exit 0: the report looked for regressions only.
    results = _results_file(tmp_path / "r.json", (Verdict.REGRESSION, Verdict.ERROR))
    assert main(["report", str(results)]) == EXIT_ERROR


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("verdicts", [v for v in MIXES if v], ids=lambda mix: "+".join(mix))
def test_the_action_job_verdict_agrees(verdicts: tuple[Verdict, ...], strict: bool) -> None:
    runs = [{"verdict": v.value} for v in verdicts]
    status = expected_status(verdicts, strict)
    pytest_exit = 1 if status else 0
    job = overall_verdict(runs, pytest_exit, strict=strict)
    assert job == {EXIT_OK: "pass", EXIT_REGRESSION: "regression", EXIT_ERROR: "error"}[status]


def test_the_action_calls_a_run_without_a_known_verdict_an_error() -> None:
    assert overall_verdict([{"verdict": "regressed"}], 1) == "error"
    assert overall_verdict([{"verdict": "pass"}], 1) == "error"  # pytest failed, for what?
    assert overall_verdict(None, 0) == "error"
