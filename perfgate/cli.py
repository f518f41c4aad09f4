"""The ``perfgate`` command line: a thin shell over :mod:`perfgate.ingest`,
:mod:`perfgate.analysis` and :mod:`perfgate.report`.

Exit status: 0 success, 1 regression (gating commands), 2 usage, configuration or data
error — one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate import __version__
from perfgate.errors import PerfgateError

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_ERROR = 2
FORMATS = ("table", "json", "md")


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and one line for usage errors (as it does), to stderr."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfgate",
        description="Performance-regression gate for ML models: inspect profiles "
        "(msprof, torch_npu, torch.profiler) and compare them.",
    )
    parser.add_argument("--version", action="version", version=f"perfgate {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    inspect = commands.add_parser(
        "inspect",
        help="metrics and top operators of one profile",
        description="Read one profile (directory or trace file; the format is detected) and "
        "print step time, the step breakdown, utilization, copy ratio and the top operators.",
    )
    inspect.add_argument(
        "path",
        metavar="PROFILE",
        help="a *_ascend_pt or PROF_* directory, a torch.profiler trace (.json/.json.gz), "
        "a timeline, kernel_details.csv, or an msprof/torch_npu .db",
    )
    inspect.add_argument(
        "--format", choices=FORMATS, default="table", help="output format. Default: table"
    )
    inspect.add_argument(
        "--top",
        type=_positive_int,
        default=10,
        metavar="N",
        help="operators to list (table and md; json lists all unless given). Default: 10",
    )
    inspect.add_argument(
        "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout"
    )
    inspect.set_defaults(handler=_cmd_inspect)
    return parser


def _cmd_inspect(args: argparse.Namespace) -> int:
    from perfgate.analysis.metrics import analyze
    from perfgate.ingest import load_profile
    from perfgate.report.inspect import inspect_document, render_markdown, render_table

    profile = load_profile(args.path)
    analysis = analyze(profile)
    if args.format == "json":
        top = args.top if args.top_given else None
        text = json.dumps(inspect_document(profile, analysis, top=top), indent=2) + "\n"
    elif args.format == "md":
        text = render_markdown(profile, analysis, top=args.top)
    else:
        text = render_table(profile, analysis, top=args.top)
    _write(text, args.output)
    return EXIT_OK


def _write(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    target = Path(output)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PerfgateError(f"{target}: cannot write the report: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    args.top_given = any(a == "--top" or a.startswith("--top=") for a in raw)
    try:
        status: int = args.handler(args)
    except PerfgateError as exc:
        print(f"perfgate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `perfgate inspect … | head` closed the pipe: not an error.
        sys.stderr.close()
        return EXIT_OK
    return status


if __name__ == "__main__":
    sys.exit(main())
