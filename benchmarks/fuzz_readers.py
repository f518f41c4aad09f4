"""Mutation fuzzing of every profile reader, at scale: the figures of docs/reliability.md.

Each case copies a real fixture from ``tests/data``, applies one or two random mutations
(cells, columns, rows, bytes, JSON values and nesting, SQLite values, rows and tables; see
``tests/fuzz_profiles.py``), runs ``perfgate inspect --format json`` in a forked child under a
30 s alarm and a 2 GiB memory limit, and judges the outcome: ``ok`` (exit 0, physically valid
numbers, strict JSON), ``clean`` (exit 2, one line naming the file), ``vague`` (exit 2 but no
file named, or an internal column), ``traceback``, ``wrong`` (exit 0 with a number that breaks
physics), ``hang`` or ``memory``.

    python benchmarks/fuzz_readers.py --cases 300 --seed 1 [--format kineto] [--deep]
        [--show 5] [--jobs 2]

``--cases`` is per format; ``--deep`` also draws the 2,000 / 30,000 / 100,000-deep JSON
nestings; ``--show N`` prints N failing cases per format with their mutations (replay one with
``--seed`` and ``--only CASE``). The CI suite (``tests/test_fuzz_readers.py``) runs fewer cases
through Hypothesis; ``pytest --fuzz`` runs more.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzz_profiles as fz


def run_format(
    fmt: str, cases: int, seed: int, deep: bool, show: int, only: int | None
) -> tuple[str, dict[str, int], list[str], float]:
    fz.warm_up()
    targets = [t for t in fz.TARGETS if t.fmt == fmt]
    counts: fz.FormatCounts = {}
    shown: list[str] = []
    started = time.monotonic()
    for case in range(cases):
        if only is not None and case != only:
            continue
        rng = random.Random(f"{seed}/{fmt}/{case}")
        target = targets[rng.randrange(len(targets))]
        with tempfile.TemporaryDirectory(prefix="perfgate-fuzz-") as tmp:
            outcome, done = fz.run_case(
                target,
                fz.RandomChooser(rng),
                Path(tmp),
                mutations=1 + (rng.randrange(4) == 0),
                deep=deep,
            )
        fz.tally(counts, fmt, outcome)
        if fz.failures(outcome) and len(shown) < show:
            shown.append(
                f"  [{fmt} case {case}] {target.name}: {' | '.join(done)}\n"
                f"      → {outcome.kind}: {outcome.detail[:300]}"
            )
    return fmt, counts.get(fmt, dict.fromkeys(fz.KINDS, 0)), shown, time.monotonic() - started


def use_checkout(root: Path) -> None:
    """Import perfgate from ``root``: drop the editable install's finder, put ``root`` first."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, str(root.resolve()))
    import perfgate

    assert Path(perfgate.__file__).resolve().is_relative_to(root.resolve()), perfgate.__file__


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300, help="cases per format (300)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", action="append", choices=fz.FORMATS, help="only these")
    parser.add_argument("--deep", action="store_true", help="draw deep JSON nesting too")
    parser.add_argument("--show", type=int, default=0, metavar="N", help="failing cases to show")
    parser.add_argument("--only", type=int, help="replay one case number")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--perfgate",
        metavar="DIR",
        help="import perfgate from this checkout instead (e.g. `git archive main` unpacked): "
        "the figures before a change",
    )
    args = parser.parse_args()
    if args.perfgate:
        use_checkout(Path(args.perfgate))
    formats = args.format or list(fz.FORMATS)
    jobs = [(f, args.cases, args.seed, args.deep, args.show, args.only) for f in formats]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run_format, *zip(*jobs)))
    else:
        results = [run_format(*job) for job in jobs]
    header = ["format", "tried", *fz.KINDS, "seconds"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    total = dict.fromkeys(fz.KINDS, 0)
    for fmt, counts, _, seconds in results:
        tried = sum(counts.values())
        print(
            f"| {fmt} | {tried} | "
            + " | ".join(str(counts[k]) for k in fz.KINDS)
            + f" | {seconds:.0f} |"
        )
        for k in fz.KINDS:
            total[k] += counts[k]
    print(
        f"| all | {sum(total.values())} | " + " | ".join(str(total[k]) for k in fz.KINDS) + " | |"
    )
    for _, _, shown, _ in results:
        for line in shown:
            print(line)
    broken = sum(total[k] for k in fz.KINDS if k not in ("ok", "clean"))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
