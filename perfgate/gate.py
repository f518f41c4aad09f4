"""The gate, shared by the CLI and the pytest plugin: find the baseline of each run, compare,
record new baselines. One gate, two doors.

The path of one run: its benchmark's rules are resolved once (:meth:`Settings.rules_for`),
the store is looked up along the candidate commits, and :func:`compare_runs` decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.analysis.compare import Comparison, Look, compare_runs, gated_value
from perfgate.errors import Interrupted, PerfgateError, StoreError
from perfgate.records import BASELINE_FORMAT, BASELINE_FORMAT_VERSION, RunRecord
from perfgate.rules import Rules, Settings
from perfgate.store.baselines import history, prepare_baseline, stored_envs, write_prepared
from perfgate.store.git import Walk, baseline_walk, current_commit, stores_holding
from perfgate.verdict import Verdict

if TYPE_CHECKING:
    from perfgate.analysis.history import History
    from perfgate.store.git import Candidate


def pair_records(
    baselines: Sequence[RunRecord], currents: Sequence[RunRecord]
) -> list[tuple[RunRecord | None, RunRecord]]:
    """Match records by benchmark name; two single records pair whatever their names."""
    if len(baselines) == 1 and len(currents) == 1:
        return [(baselines[0], currents[0])]
    by_name = {str(b.get("benchmark")): b for b in baselines}
    return [(by_name.get(str(c.get("benchmark"))), c) for c in currents]


def judging_rules(
    record: RunRecord, settings: Settings, source: str | None = None
) -> tuple[Rules, Look | None]:
    """The rules and the look that judge ``record``: the settings' for its benchmark, with
    what ``pytest --perfgate`` wrote of its own judging into a results file's run (its
    ``judged_by``: the marker's thresholds, the α of the deciding look), so that comparing
    that file again reaches the plugin's verdict. ``source``, the file, names the run in
    errors with its benchmark.

    Raises:
        ConfigError: the thresholds written there are not thresholds.
    """
    from perfgate.config import parse_rules

    rules = settings.rules_for(record["benchmark"])
    judged = record.get("judged_by")
    if not isinstance(judged, Mapping):
        return rules, None
    thresholds = judged.get("thresholds")
    if thresholds:
        run = f"the run of {record['benchmark']!r}"
        where = f"{source}: {run}" if source else run
        rules = parse_rules({"thresholds": thresholds}, f"{where}.judged_by", rules)
    alpha = judged.get("alpha_look")
    # Measuring is over: whatever this look cannot decide stays undecided (unstable).
    return rules, Look(alpha=float(alpha), final=True) if alpha is not None else None


@dataclass(frozen=True)
class StoreLookup:
    """Where and how to look baselines up.

    ``exclude_head``: skip a baseline recorded for HEAD itself (compare a push with its
    first parent even when HEAD's own baseline exists). Off by default: after
    ``--perfgate-update``, editing the model and running again must compare with the
    baseline just recorded; a clean re-run of HEAD compares with itself and says so.

    ``strict`` (``--strict``, ``--perfgate-strict``): a lookup that could not see the
    history it needs (a shallow clone) is an ``error``, not ``no-baseline``.
    """

    repo_dir: Path
    baseline_ref: str | None = None
    exclude_head: bool = False
    strict: bool = False
    # Look each run's baselines up from the commit it was measured at (a results file
    # compared later, whatever is checked out), as the plugin did when it measured it.
    from_measured_commit: bool = False


def store_root(repo_dir: Path, settings: Settings) -> Path:
    return repo_dir / settings.baseline.dir


def gate_against_store(
    currents: Sequence[RunRecord],
    settings: Settings,
    lookup: StoreLookup,
    *,
    rules: Mapping[str, Rules] | None = None,
    look: Look | None = None,
    source: str | None = None,
) -> list[Comparison]:
    """Compare each current record with the baseline the store holds for it: the nearest
    candidate commit's, with the look-back of the ones after it. ``rules``: per-benchmark
    rules that replace the settings' (a pytest marker's thresholds); without them, a results
    file's run is judged as when it was measured (:func:`judging_rules`; ``source``, the
    file, names a run in its errors)."""
    root = store_root(lookup.repo_dir, settings)
    walks: dict[str | None, Walk] = {}

    def walk_for(commit: str | None) -> Walk:
        if commit not in walks:
            walks[commit] = baseline_walk(
                lookup.repo_dir,
                baseline_branch=settings.baseline.branch,
                start_ref=lookup.baseline_ref,
                max_depth=settings.baseline.max_depth,
                exclude_head=lookup.exclude_head,
                head_ref=commit,
            )
        return walks[commit]

    comparisons = []
    for current in currents:
        name, env = current["benchmark"], current["env"]
        measured = current.get("commit") if lookup.from_measured_commit else None
        walk = walk_for(str(measured) if measured else None)
        if (crashed := unmeasured(current)) is not None:
            comparisons.append(crashed)
            continue
        bench_rules, judged_look = judging_rules(current, settings, source)
        bench_rules = (rules or {}).get(name) or bench_rules
        current_info = {"commit": current.get("commit"), "env": env}
        lookback = bench_rules.statistics.lookback
        try:
            # A results file compared later may find the baseline that was recorded from it
            # (its --perfgate-update run, or the push job that recorded it): one more is read.
            extra = 1 if lookup.from_measured_commit else 0
            found = history(root, name, env, walk.candidates, limit=lookback + extra)
        except StoreError as exc:
            # A damaged baseline is no missing one, and the other benchmarks are still
            # judged: this one's verdict is error (both doors, plugin and compare).
            comparisons.append(damaged_store(name, exc, current_info))
            continue
        own = next((f for f in found if recorded_from(f.record, current)), None)
        found = [f for f in found if f is not own][:lookback]
        own_note = (
            f"the baseline of {own.candidate.sha[:12]} was recorded from this very run: it is "
            "not compared with itself" + (", but with the baselines before it" if found else "")
            if own is not None
            else None
        )
        if not found:
            try:
                missing = _no_baseline(current, root, walk, lookup.strict, current_info)
            except StoreError as exc:  # listing the runner's other environments
                comparisons.append(damaged_store(name, exc, current_info))
                continue
            missing.notes[:0] = [own_note] if own_note else []
            comparisons.append(missing)
            continue
        nearest = found[0]
        info = {
            "commit": nearest.candidate.sha,
            "how": nearest.candidate.how,
            "distance": nearest.candidate.distance,
            "path": str(nearest.path),
            "env": env,
            "lookback": len(found),
        }
        comparison = compare_runs(
            nearest.record,
            current,
            bench_rules,
            history=[f.record for f in found],
            baseline_info=info,
            current_info=current_info,
            look=look or judged_look,
        )
        if own_note:
            comparison.notes.append(own_note)
        if nearest.record.get("dirty"):
            comparison.warnings.append(
                f"the baseline of {nearest.candidate.sha[:12]} was recorded from a working tree "
                "with uncommitted changes (--allow-dirty): it may not be what that commit "
                "measures; record it again from a clean checkout"
            )
        # Whether the tree is dirty costs a `git diff`: asked only when it matters.
        at_head = nearest.candidate.sha == walk.head
        checkout = current_commit(lookup.repo_dir, store=root) if at_head else None
        if checkout is not None and checkout.sha == walk.head and not checkout.dirty:
            comparison.notes.append(
                "the baseline was recorded from this very commit with a clean tree: any "
                "difference comes from the environment, the inputs or the machine, not the code"
            )
        comparisons.append(comparison)
    return comparisons


def damaged_store(benchmark: str, exc: StoreError, current: dict[str, Any]) -> Comparison:
    """The ``error`` comparison of a benchmark whose baselines include a file perfgate cannot
    use: passing as no-baseline would let every change through unjudged."""
    return Comparison(
        benchmark=benchmark,
        verdict=Verdict.ERROR,
        baseline={"commit": None, "path": exc.path},
        current=current,
        notes=[f"the baseline store holds a file perfgate cannot use: {exc}; {exc.remedy}"],
    )


def recorded_from(baseline: RunRecord, current: RunRecord) -> bool:
    """Whether ``baseline`` holds the very measurement of ``current``: recorded from it (the
    same commit and the same measured steps, which no second run repeats to the last digit)."""
    return (
        holds_measurement(current)
        and baseline.get("commit") == current.get("commit")
        and baseline.get("timing") == current.get("timing")
        and baseline["samples"] == current["samples"]
        and baseline.get("operators") == current.get("operators")
    )


def holds_measurement(record: RunRecord) -> bool:
    """Whether a run measured anything: timed steps, profiled samples or operators."""
    return bool(
        (record.get("timing") or {}).get("step_time_us")
        or any(record["samples"].values())
        or record.get("operators")
    )


def unmeasured(record: RunRecord) -> Comparison | None:
    """The ``error`` comparison of a run that measured nothing (a benchmark that crashed: its
    results-file run says why), or None for a measured one. Compared, such a run would pass
    on nothing, with no metric to judge."""
    if holds_measurement(record):
        return None
    said = (record.get("comparison") or {}).get("notes")  # type: ignore[attr-defined]
    reasons = [str(n) for n in said or [] if isinstance(n, str) and n.startswith("not measured")]
    verdict = record.get("verdict")
    return Comparison(
        benchmark=str(record["benchmark"]),
        verdict=Verdict.ERROR,
        baseline={"commit": None},
        current={"commit": record.get("commit"), "env": record["env"]},
        notes=reasons
        or [
            "not measured: the run holds no timed steps, samples or operators"
            + (f" (its verdict: {verdict})" if isinstance(verdict, str) else "")
        ],
    )


def measured(record: RunRecord) -> dict[str, float | int | None]:
    """What a run shows on its own: each metric as a comparison would take it (step time from
    the timed rounds, the ratios from the profiled steps), the profiled steps, and the timed
    steps when there were timed rounds."""
    out: dict[str, float | int | None] = {
        name: gated_value(record, name)
        for name in ("step_time_us", "utilization", "copy_ratio", "comm_ratio", "free_ratio")
    }
    out["steps"] = len(record.get("samples", {}).get("step_time_us", []))
    timing = record.get("timing")
    if timing:
        out["timed_steps"] = len(timing.get("step_time_us", []))
    return out


# How a no-baseline verdict says that the benchmark's baselines are another runner's: the
# terminal summary repeats it (the rest of the notes are in the reports).
OTHER_ENVIRONMENTS = "exist for other runner environments"
OTHER_STORES = "exist in another store of this repository"


def _no_baseline(
    current: RunRecord,
    root: Path,
    walk: Walk,
    strict: bool,
    current_info: dict[str, Any],
) -> Comparison:
    name, env = str(current["benchmark"]), str(current["env"])
    candidates = walk.candidates
    comparison = Comparison(
        benchmark=name,
        verdict=Verdict.ERROR if walk.shallow and strict else Verdict.NO_BASELINE,
        baseline={"commit": None, "how": candidates[0].how if candidates else None},
        current={**current_info, "measured": measured(current)},
        advice=[dict(a) for a in current.get("advice") or []],
    )
    where = f"{root}/{name}/{env}/"
    start = candidates[0].sha[:12] if candidates else "HEAD"
    if walk.shallow:
        # Not "record a baseline": the baselines may well exist, in history this clone lacks.
        comparison.notes.append(
            f"no baseline for {name!r} on {env!r} in {where} within the {len(candidates)} "
            f"commit(s) of {start} that this shallow clone has: the gate cannot see the "
            "baselines of older commits; fetch the whole history (`fetch-depth: 0` on "
            "actions/checkout, or `git fetch --unshallow`)"
            + ("" if strict else "; with --strict this is an error")
        )
        return comparison
    comparison.notes.append(
        f"no baseline for {name!r} on {env!r} in {where} within {len(candidates)} commit(s) "
        f"of {start}; record one on the {walk.branch} branch with "
        "`pytest --perfgate --perfgate-update` or `perfgate baseline update --from RESULTS`"
    )
    other_envs = [e for e in stored_envs(root, name) if e != env]
    if other_envs:
        comparison.notes.append(
            f"baselines of {name!r} {OTHER_ENVIRONMENTS}: "
            f"{', '.join(other_envs)} (this runner is {env!r}; set baseline.env to share one)"
        )
        return comparison
    here = root.resolve()
    others = [s for s in stores_holding(root, name) if s.resolve() != here]
    if others:
        # A perfgate.yaml in a subfolder is taken when pytest starts at or below it: started
        # elsewhere, the run reads another store and passed as no-baseline without a word.
        comparison.notes.append(
            f"baselines of {name!r} {OTHER_STORES}: {', '.join(str(s) for s in others)} "
            f"(this run's store is {root}: perfgate takes the settings and store of the "
            "nearest folder with a perfgate.yaml at or above where pytest starts; start it "
            "there, or give --perfgate-config and baseline.dir)"
        )
    return comparison


# What a baseline keeps of a run: the keys of the run record's schema, and the extras the
# measuring code adds (the runner's load). A results file's verdict, comparison and
# timings, and any other key, stay out, so a results file cannot make a baseline big.
BASELINE_CONTENT = tuple(
    sorted((RunRecord.__required_keys__ | RunRecord.__optional_keys__ | {"runner"}) - {"commit"})
)
_NAMES = ("benchmark", "env")


def record_baselines(
    records: Sequence[RunRecord],
    settings: Settings,
    repo_dir: Path,
    *,
    allow_dirty: bool = False,
    allow_other_commit: bool = False,
    measured_dirty: bool = False,
) -> list[Path]:
    """Write each record as the baseline of HEAD.

    Refuses a dirty tree, or records measured on one (``measured_dirty``: a results file that
    says so), unless ``allow_dirty``, and a record measured at another commit than HEAD (its
    ``commit`` key) unless ``allow_other_commit``: a baseline is what its commit's code
    measured.
    """
    commit = current_commit(repo_dir, store=store_root(repo_dir, settings))
    if commit.dirty and not allow_dirty:
        raise PerfgateError(
            f"{repo_dir}: the working tree has uncommitted changes, so HEAD "
            f"{commit.sha[:12]} is not what was measured; commit them, or pass --allow-dirty "
            "to record a baseline marked dirty"
        )
    if measured_dirty and not allow_dirty:
        raise PerfgateError(
            "the results were measured on a working tree with uncommitted changes (the file "
            f"says dirty: true), so HEAD {commit.sha[:12]} is not what was measured; measure "
            "the commit again, or pass --allow-dirty to record a baseline marked dirty"
        )
    for record in records:
        if not holds_measurement(record):
            # A benchmark that crashed (its results-file run says error) or an A/B record:
            # a baseline of it would hold nothing to compare with.
            verdict = record.get("verdict")
            said = f" (its verdict: {verdict})" if isinstance(verdict, str) else ""
            raise PerfgateError(
                f"{record['benchmark']}: holds no measurement{said}, so it can be no "
                "baseline; nothing was written (pick the measured ones with --benchmark)"
            )
        measured_at = record.get("commit")
        if measured_at and measured_at != commit.sha and not allow_other_commit:
            raise PerfgateError(
                f"{record['benchmark']}: measured at commit {str(measured_at)[:12]}, but HEAD "
                f"is {commit.sha[:12]}; check out the measured commit, or pass "
                "--allow-other-commit to record it as HEAD's baseline anyway"
            )
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    root = store_root(repo_dir, settings)
    prepared = []
    for record in records:
        # Only what a baseline is made of: a results-file run also carries its verdict,
        # comparison and timings, and a file may carry anything else besides.
        run: Mapping[str, Any] = record
        baseline = {
            "format": BASELINE_FORMAT,
            "format_version": BASELINE_FORMAT_VERSION,
            "benchmark": record["benchmark"],
            "env": record["env"],
            "commit": commit.sha,
            "branch": commit.branch,
            "commit_time": commit.time,
            "created": created,
            "dirty": commit.dirty or measured_dirty,
            **{k: v for k, v in run.items() if k in BASELINE_CONTENT and k not in _NAMES},
        }
        prepared.append(prepare_baseline(root, baseline))
    # Every baseline checked before the first is written; a write that still fails (a full
    # disk) says which were written before it.
    paths: list[Path] = []
    for path, data in prepared:
        try:
            paths.append(write_prepared(path, data))
        except KeyboardInterrupt:  # each write is whole or not there: say which are there
            written = ", ".join(str(p) for p in paths) or "none"
            raise Interrupted(
                f"interrupted while writing baselines: {len(paths)} of {len(prepared)} "
                f"written ({written}); {path} and the ones after it were not"
            ) from None
        except PerfgateError as exc:
            if not paths:
                raise
            told = str(exc).removesuffix("; nothing was written")
            written = ", ".join(str(p) for p in paths)
            raise PerfgateError(
                f"{told}; it and the baselines after it were not written, those before it "
                f"were: {written}"
            ) from None
    return paths


def main_line_candidates(repo_dir: Path, branch: str | None, depth: int) -> list[Candidate]:
    """The first parents of the baseline branch's tip (the repository's default branch when
    ``branch`` is None; HEAD's when there is no such branch), newest first, ``depth`` of
    them."""
    from perfgate.store.git import Candidate, main_line

    try:
        shas = main_line(repo_dir, branch)[:depth]
    except PerfgateError:
        walk = baseline_walk(repo_dir, baseline_branch=branch, max_depth=depth)
        return list(walk.candidates)
    how = f"main line ({branch or 'default branch'})"
    return [Candidate(sha=sha, distance=back, how=how) for back, sha in enumerate(shas)]


def history_along_main(
    repo_dir: Path,
    settings: Settings,
    benchmark: str,
    env: str,
    metric: str = "step_time",
    depth: int = 200,
) -> History:
    """``metric`` (a threshold label: ``step_time``, ``utilization`` …) of ``benchmark`` on
    ``env`` over the baselines of the main line, with its change points and creep
    (docs/history.md)."""
    from perfgate.analysis.history import analyse, point_of

    candidates = main_line_candidates(repo_dir, settings.baseline.branch, depth)
    rule = settings.rules_for(benchmark).metrics[metric]
    found = history(store_root(repo_dir, settings), benchmark, env, candidates, limit=depth)
    # A baseline recorded from a profile has no timed rounds: its step times are the
    # profiled steps', slower by the profiler's cost. Among timed ones it would make a
    # change point of its own; it is left out, and so is one without the metric, saying so.
    timed_only = rule.metric == "step_time_us" and any(f.record.get("timing") for f in found)
    points, untimed, valueless = [], 0, 0
    for f in reversed(found):
        if timed_only and not f.record.get("timing"):
            untimed += 1
        elif point := point_of(f.record, rule.metric, f.candidate.sha, f.candidate.distance):
            points.append(point)
        else:
            valueless += 1
    # How far was looked: a baseline further back is not "none".
    looked_at = (
        f"on the main line within the {len(candidates)} commit(s) looked at (--max-depth {depth})"
    )
    if found and not points:  # there are baselines: they lack the metric
        looked_at = (
            f"with {metric} {looked_at}: the {len(found)} found there hold none (recorded "
            "without a profiler, or by one that does not measure it)"
        )
    found_history = analyse(points, rule, benchmark=benchmark, env=env, looked_at=looked_at)
    left_out = []
    if untimed:
        left_out.append(
            f"{untimed} baseline(s) without timed rounds left out (recorded from a profile: "
            "their step times are the profiled steps', slower by the profiler's cost)"
        )
    if valueless and points:
        left_out.append(f"{valueless} baseline(s) without {metric} values left out")
    if left_out:
        found_history.note = "; ".join(filter(None, [found_history.note, *left_out]))
    return found_history
