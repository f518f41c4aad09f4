"""Option blocks shared by the pytest plugin and the CLI, so ``--perfgate-config`` and
``perfgate compare --config`` parse the same way (the same help, the same checks).

Each block takes an ``addoption`` callable (``parser.getgroup(...).addoption`` or
``argparse.ArgumentParser.add_argument``) and a prefix (``perfgate-`` or none).
"""

from __future__ import annotations

import argparse
from typing import Any, Protocol

from perfgate.rules import PROFILERS


class AddOption(Protocol):
    def __call__(self, *names: str, **attributes: Any) -> Any: ...


def profiler_name(value: str) -> str:
    """An ``argparse`` type: one of :data:`~perfgate.rules.PROFILERS`."""
    if value not in PROFILERS:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a profiler perfgate knows (choose from {', '.join(PROFILERS)})"
        )
    return value


def whole_number(text: str, minimum: int = 1, why: str = "") -> int:
    """A whole number of ``minimum`` or more from an argument (``why``: said after a number
    too small), or an ``argparse`` error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be {minimum} or more{why}")
    return value


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number of 1 or more."""
    return whole_number(text)


def given(what: str, *, has_default: bool = True) -> Any:
    """An ``argparse`` type: text that is not empty (``--config=`` from an unset shell
    variable fell back to the default without a word; an empty path read ``.``)."""
    hint = "; leave the option out for the default" if has_default else ""

    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"is empty (expected {what}{hint})")
        return text

    check.__name__ = what  # argparse names the type in its "invalid … value" message
    return check


def add_config_option(addoption: AddOption, prefix: str = "") -> None:
    addoption(
        f"--{prefix}config",
        type=given("a file"),
        default=None,
        metavar="FILE",
        help="perfgate.yaml or pyproject.toml. Default: the one at the repository root",
    )


def add_gate_options(addoption: AddOption, prefix: str = "") -> None:
    """How a run is gated: which baseline, and whether undecided verdicts fail."""
    addoption(
        f"--{prefix}baseline-ref",
        type=given("a git ref"),
        default=None,
        metavar="REF",
        help="look baselines up from REF instead of the merge-base with the baseline branch",
    )
    addoption(
        f"--{prefix}baseline-branch",
        type=given("a branch name"),
        default=None,
        metavar="NAME",
        help="the branch whose baselines are looked up (the merge-base with it). Default: "
        "baseline.branch from the configuration, else the repository's default branch",
    )
    addoption(
        f"--{prefix}strict",
        action="store_true",
        default=None,
        help="fail also on no-baseline, incomparable and unstable",
    )


def add_profiler_option(addoption: AddOption, prefix: str = "") -> None:
    addoption(
        f"--{prefix}profiler",
        type=profiler_name,
        default=None,
        metavar="NAME",
        help=f"profiler: {' | '.join(PROFILERS)}. Default: the config's profiler, else auto "
        "(torch_npu on an NPU, torch elsewhere; msprof for a command when it is on PATH)",
    )
