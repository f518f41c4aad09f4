"""The action's last step: fail the job on regression (when configured) or on error.

Inputs (environment): ``PERFGATE_VERDICT`` (the benchmark step's ``verdict`` output; empty
when that step itself failed) and ``PERFGATE_FAIL_ON_REGRESSION`` (default true).
"""

from __future__ import annotations

from perfgate.action import (
    ERROR,
    PASS,
    REGRESSION,
    annotate,
    env_input,
    flag_input,
    run_main,
)


def main() -> int:
    """Exit 1 when the job should fail, else 0."""
    verdict = env_input("PERFGATE_VERDICT")
    fail_on_regression = flag_input("PERFGATE_FAIL_ON_REGRESSION", True)
    if verdict == PASS:
        print("perfgate: pass")
        return 0
    if verdict == REGRESSION:
        if fail_on_regression:
            print("perfgate: failing the job: a benchmark regressed (see the job summary)")
            return 1
        annotate("warning", "perfgate: a benchmark regressed; fail-on-regression is false")
        return 0
    if verdict == ERROR:
        print("perfgate: failing the job: the benchmarks could not be gated (see the job log)")
    else:
        annotate("error", f"perfgate: no verdict ({verdict!r}): the benchmark step failed")
    return 1


if __name__ == "__main__":
    run_main(main)
