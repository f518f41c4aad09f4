"""The run record — what a baseline file and a results file hold for one benchmark — as a
typed shape, validated once where it enters perfgate (a file read, a file written).

A record is a plain JSON object (a ``dict`` at run time, typed here with ``TypedDict``):

* ``timing`` — the step times the gate judges, one entry per timed step, in rounds:
  ``step_time_us``, ``round`` (the round of the step within its process) and ``process``
  (which process of the run measured it: a baseline is recorded in several);
* ``samples`` — per-step samples of the profiled steps (``step_time_us``, ``utilization``,
  ``copy_ratio``, the breakdown …; ``None`` where a step has no value), with ``step`` (the
  step ids) and ``process`` (the process whose profiled pass the step belongs to);
* ``operators`` — the operator table (``op_type, core, category, calls_per_step,
  time_per_step_us, share``, optionally ``samples_us``);
* ``fingerprint`` — the environment (flat: names to strings, numbers, booleans);
* ``parameters`` — what the benchmark was run with (steps, batch size, the command …);
* ``advice`` — the advisor's hints on the profiled steps (:mod:`perfgate.analysis.advisor`);
* ``timeline`` — a compact strip of one representative profiled step
  (:mod:`perfgate.analysis.timeline`), for the HTML report;
* ``test`` — the pytest test that measured it (``id``, ``params``): a baseline of another
  test under the same benchmark name is not compared.

:func:`validate_run`, :func:`validate_baseline` and :func:`validate_results` check a decoded
JSON value against these shapes and raise one :class:`~perfgate.errors.PerfgateError` that
names the file, the key and what was expected. Everything after them can trust the record.
The shapes are published as JSON Schema by :func:`json_schema` (``docs/json.md``).
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

from perfgate.errors import NewerFormat, PerfgateError
from perfgate.verdict import MetricStatus, Verdict

BASELINE_FORMAT = "perfgate.baseline"
# Format history (bump on any change a reader of the previous version would misread):
#   1 — first version: format, format_version, benchmark, env, commit, then the run record;
#       the gated step times in samples.step_time_us, the profiled ones in
#       samples.profiled_step_time_us.
#   2 — rounds: the gated step times move to ``timing`` (with ``round`` and ``process``);
#       samples.step_time_us is the profiled step time. Version 1 files are read as one
#       round of one process.
BASELINE_FORMAT_VERSION = 2
RESULTS_FORMAT = "perfgate.results"
# History: 1 — first version: {format, format_version, commit, branch, dirty, created, runs[]}.
#          2 — runs are version 2 records (``timing``).
RESULTS_FORMAT_VERSION = 2

# Bounds of what a record keeps, so a baseline stays tens of KB and a hostile file cannot
# make one huge (a run of 200 rounds of 500 steps is far beyond any benchmark here).
MAX_SAMPLES = 100_000
MAX_OPERATORS = 2_000
MAX_NOTES = 200
MAX_TEXT = 2_000
SAFE_NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"  # no leading dot: not ., .., .git
FULL_SHA_PATTERN = r"^([0-9a-f]{40}|[0-9a-f]{64})$"

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
# The advisor's hints and the timeline strip: bounded, so a record stays small.
MAX_ADVICE = 16
MAX_ADVICE_ITEMS = 8
MAX_ADVICE_STEPS = 32
MAX_STRIP_SEGMENTS = 200
NumberOrNull = Number | None  # JSON null where the number is unknown (NaN)
Sample = NumberOrNull
SampleList = Annotated[list[Sample], Field(max_length=MAX_SAMPLES)]
Name = Annotated[str, Field(pattern=SAFE_NAME_PATTERN)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Scalar = Annotated[str, Field(max_length=MAX_TEXT)] | Number | bool | None
_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class OperatorEntry(TypedDict):
    """One row of a run's operator table (device µs per step)."""

    op_type: Text
    core: Text
    category: NotRequired[Text]
    calls_per_step: Sample
    time_per_step_us: Sample
    share: Sample
    samples_us: NotRequired[SampleList]
    # A baseline of several processes: each process's time per step, in the order of
    # ``samples.process`` (``time_per_step_us`` is their mean). How far apart they are is
    # the operator's noise between processes.
    process_times_us: NotRequired[Annotated[list[Number], Field(max_length=MAX_SAMPLES)]]


MAX_ITEM_TEXT = 200  # one text of an advice item (an operator, a kernel sequence)
ItemValue = Annotated[str, Field(max_length=MAX_ITEM_TEXT)] | bool | int | Number | None
Key = Annotated[str, Field(max_length=64)]
AdviceItem = Annotated[dict[Key, ItemValue], Field(max_length=16)]


@with_config(_OPEN)
class AdviceEntry(TypedDict):
    """One advisor hint: its rule, the figures that fired it, the steps and items involved."""

    rule: Key
    impact: Number
    figures: Annotated[dict[Key, Number], Field(max_length=32)]
    steps: Annotated[list[int], Field(max_length=MAX_ADVICE_STEPS)]
    items: Annotated[list[AdviceItem], Field(max_length=MAX_ADVICE_ITEMS)]


Segment = Annotated[list[Number], Field(min_length=2, max_length=2)]


class TimelineStrip(TypedDict):
    """Busy intervals of one step per lane (compute, comm, copy), µs from the step's start."""

    step: int
    rank: int
    step_time_us: Number
    lanes: Annotated[
        dict[
            Annotated[str, Field(max_length=32)],
            Annotated[list[Segment], Field(max_length=MAX_STRIP_SEGMENTS)],
        ],
        Field(max_length=8),
    ]


@with_config(_OPEN)
class PytestIdentity(TypedDict, total=False):
    """Which pytest test measured a run: its id (the file relative to the repository's top,
    then the rest of pytest's node id) and its pytest parameters (shown as text)."""

    id: Text
    params: Annotated[dict[Key, Text], Field(max_length=64)]


@with_config(_OPEN)
class RunRecord(TypedDict):
    """One benchmark's run, as measured (see the module docstring)."""

    benchmark: Name
    env: Name
    samples: dict[Text, SampleList]
    timing: NotRequired[dict[Text, SampleList]]
    fingerprint: NotRequired[dict[Text, Scalar]]
    parameters: NotRequired[dict[Text, Any]]
    operators: NotRequired[Annotated[list[OperatorEntry], Field(max_length=MAX_OPERATORS)]]
    notes: NotRequired[Annotated[list[Text], Field(max_length=MAX_NOTES)]]
    profile: NotRequired[dict[Text, Any]]
    commit: NotRequired[Annotated[str, Field(pattern=FULL_SHA_PATTERN)] | None]
    advice: NotRequired[Annotated[list[AdviceEntry], Field(max_length=MAX_ADVICE)]]
    timeline: NotRequired[TimelineStrip | None]
    test: NotRequired[PytestIdentity]


class BaselineRecord(RunRecord):
    """A baseline file: a run record with the commit it was recorded at (``commit`` is
    required here: :func:`validate_baseline` checks it)."""

    format: str
    format_version: int
    branch: NotRequired[str | None]
    commit_time: NotRequired[str | None]
    created: NotRequired[str | None]
    dirty: NotRequired[bool]


@with_config(_OPEN)
class ComparisonSideInfo(TypedDict, total=False):
    """Which run a comparison's side is: the baseline's commit, how it was found …"""

    commit: Annotated[str, Field(max_length=64)] | None
    how: Text | None
    distance: int | None
    path: Text | None
    env: Text | None
    measured: dict[Text, NumberOrNull] | None


class RoundBox(TypedDict):
    """One round's step times as a box (the HTML report's distribution chart)."""

    process: int
    round: int
    n: int
    min: Number
    p5: Number
    q1: Number
    median: Number
    q3: Number
    p95: Number
    max: Number


@with_config(_OPEN)
class BaselineSummary(TypedDict, total=False):
    """What a comparison keeps of its baseline side for the reports."""

    commit: Annotated[str, Field(max_length=64)] | None
    rounds: Annotated[list[RoundBox], Field(max_length=MAX_SAMPLES)]
    breakdown: dict[Text, NumberOrNull]
    timeline: TimelineStrip | None
    fingerprint: dict[Text, Scalar]


@with_config(_OPEN)
class ComparisonMetric(TypedDict):
    """A metric's judgement as a results file keeps it (``docs/json.md``); the reports read
    these facts."""

    name: Text
    metric: Text
    status: MetricStatus
    baseline: NotRequired[NumberOrNull]
    current: NotRequired[NumberOrNull]
    change: NotRequired[NumberOrNull]
    threshold: NotRequired[Text]
    unit: NotRequired[Text]
    bad_sign: NotRequired[int]
    gated: NotRequired[bool]
    significant: NotRequired[bool | None]
    p_value: NotRequired[NumberOrNull]
    test: NotRequired[Text | None]
    n_baseline: NotRequired[int]
    n_current: NotRequired[int]
    copy_calls: NotRequired[Annotated[list[Number], Field(min_length=2, max_length=2)] | None]


@with_config(_OPEN)
class ComparisonOperator(TypedDict):
    """One operator's change as a results file keeps it."""

    op_type: Text
    core: Text
    status: Text


@with_config(_OPEN)
class ComparisonDocument(TypedDict):
    """A benchmark's comparison in a results file (what ``perfgate report`` renders again)."""

    benchmark: Text
    verdict: Verdict
    baseline: NotRequired[ComparisonSideInfo]
    current: NotRequired[ComparisonSideInfo]
    metrics: NotRequired[Annotated[list[ComparisonMetric], Field(max_length=64)]]
    operators: NotRequired[Annotated[list[ComparisonOperator], Field(max_length=MAX_OPERATORS)]]
    warnings: NotRequired[Annotated[list[Text], Field(max_length=MAX_NOTES)]]
    notes: NotRequired[Annotated[list[Text], Field(max_length=MAX_NOTES)]]
    breakdown_delta_us: NotRequired[dict[Text, NumberOrNull]]
    step_delta_us: NotRequired[NumberOrNull]
    advice: NotRequired[Annotated[list[AdviceEntry], Field(max_length=MAX_ADVICE)] | None]
    baseline_summary: NotRequired[BaselineSummary | None]


@with_config(_OPEN)
class JudgedBy(TypedDict):
    """What judged a run beyond the settings (``pytest --perfgate``): its marker's
    thresholds, and the α of the look that decided (a group-sequential comparison)."""

    thresholds: dict[Text, Any] | None
    alpha_look: Annotated[float, Field(strict=True, ge=0, le=1)]


class ResultsRun(RunRecord):
    """A run in a results file: the record, its verdict and its comparison."""

    verdict: NotRequired[Verdict]
    # Checked where it is rendered (perfgate report: ComparisonDocument); baseline update
    # reads only the record's own keys.
    comparison: NotRequired[dict[str, Any] | None]
    baseline_path: NotRequired[str | None]
    timings_s: NotRequired[dict[str, Number]]
    judged_by: NotRequired[JudgedBy | None]


@with_config(_OPEN)
class FailedTest(TypedDict):
    """A test (or a collection) pytest failed for another reason than a benchmark's verdict."""

    test: str
    when: str  # collect, setup, call or teardown


@with_config(_OPEN)
class ResultsDocument(TypedDict):
    """What ``pytest --perfgate`` writes (``--perfgate-json``)."""

    format: str
    format_version: int
    commit: NotRequired[str | None]
    branch: NotRequired[str | None]
    dirty: NotRequired[bool | None]
    created: NotRequired[str | None]
    # Since perfgate 0.1 (optional: older files lack them): see docs/json.md.
    strict: NotRequired[bool]
    failed_elsewhere: NotRequired[list[FailedTest]]
    runs: list[ResultsRun]


COMPARISON = TypeAdapter(ComparisonDocument)
_RUN = TypeAdapter(RunRecord)
_BASELINE = TypeAdapter(BaselineRecord)
_RESULTS = TypeAdapter(ResultsDocument)


def json_schema() -> dict[str, Any]:
    """The JSON Schemas of a baseline file and a results file."""
    return {
        "baseline": _BASELINE.json_schema(),
        "results": _RESULTS.json_schema(),
    }


_LABELS = {BASELINE_FORMAT: "perfgate baseline", RESULTS_FORMAT: "perfgate results file"}
_EXPECTED_TEXT = {
    SAFE_NAME_PATTERN: "a name of letters, digits, '.', '_' or '-', not starting with '.'",
    FULL_SHA_PATTERN: "a full lowercase commit sha",
}


def _shown(document: dict[str, Any], key: str) -> str:
    return f"is {document[key]!r}" if key in document else "is missing"


def _check_format(document: object, where: str, name: str, newest: int) -> None:
    label = _LABELS[name]
    if not isinstance(document, dict):
        raise PerfgateError(
            f"{where}: expected a JSON object (a {label}), got {type(document).__name__}"
        )
    if document.get("format") != name:
        raise PerfgateError(
            f"{where}: key 'format' {_shown(document, 'format')}, not a {label} (expected {name!r})"
        )
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PerfgateError(
            f"{where}: key 'format_version' {_shown(document, 'format_version')} "
            "(expected a positive integer)"
        )
    if version > newest:
        kind = "baseline" if name == BASELINE_FORMAT else "results"
        raise NewerFormat(
            f"{where}: {kind} format_version {version} is newer than this perfgate reads "
            f"(up to {newest}); upgrade perfgate"
        )


def _problem(error: Any) -> str:
    """One validation error as "is <value> (expected <what>)" or "is missing"."""
    if error["type"] == "missing":
        return "is missing"
    got = repr(error.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    pattern = (error.get("ctx") or {}).get("pattern")
    if pattern is not None:
        expected = _EXPECTED_TEXT.get(pattern, f"text matching {pattern}")
    else:
        expected = str(error["msg"]).replace("Input should be ", "").replace("Input ", "")
    return f"is {got} (expected {expected})"


def validated(adapter: TypeAdapter[Any], value: object, where: str, prefix: str = "") -> Any:
    """``value`` validated by ``adapter``, or one :class:`PerfgateError` naming ``where`` and
    the key (``prefix`` + its path inside ``value``), the value and what was expected."""
    try:
        record = adapter.validate_python(value)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = prefix + ".".join(str(part) for part in error["loc"]) or "(top level)"
        more = f"; and {exc.error_count() - 1} more" if exc.error_count() > 1 else ""
        raise PerfgateError(f"{where}: key {key!r} {_problem(error)}{more}") from None
    return record


def _check_rounds(run: RunRecord, where: str) -> None:
    """Every column of ``timing`` (and ``samples``) has one value per step."""
    tables: tuple[tuple[str, dict[str, list[Any]] | None], ...] = (
        ("timing", run.get("timing")),
        ("samples", run.get("samples")),
    )
    for key, table in tables:
        if not table:
            continue
        lengths = {column: len(values) for column, values in table.items()}
        if len(set(lengths.values())) > 1:
            first, *_ = lengths
            other = next(c for c, n in lengths.items() if n != lengths[first])
            raise PerfgateError(
                f"{where}: key '{key}.{other}' has {lengths[other]} values but "
                f"'{key}.{first}' has {lengths[first]} (expected one value per step)"
            )
        for column in _LABEL_COLUMNS:
            _check_labels(table.get(column), f"{key}.{column}", where)
        for column, values in table.items():
            _check_measures(values, f"{key}.{column}", where)
    timing = run.get("timing")
    if timing is not None and "step_time_us" not in timing:
        raise PerfgateError(f"{where}: key 'timing.step_time_us' is missing")
    if timing is not None:
        # The gated step times are measured by a clock: a null there is damage, and a
        # metric left without values would pass unjudged.
        for index, value in enumerate(timing["step_time_us"]):
            if value is None:
                raise PerfgateError(
                    f"{where}: key 'timing.step_time_us.{index}' is null (expected the "
                    "round's measured step time in µs)"
                )


# What a measured column can hold: times (µs) are ≥ 0 and below ~116 days, a step takes
# time, ratios are ≥ 0 (above 1 only where a profiler's own breakdown overshoots its step).
_LONGEST_US = 1e13


def _check_measures(values: list[Any], key: str, where: str) -> None:
    column = key.rsplit(".", 1)[-1]
    if column.endswith("_us"):
        low, expected = 0.0, "a time in µs, from 0"
        if column == "step_time_us":
            expected = "a step time in µs, above 0"
    elif column.endswith("_ratio") or column == "utilization":
        low, expected = 0.0, "a ratio from 0"
    else:
        return
    for index, value in enumerate(values):
        if value is None:
            continue
        if column.endswith("_us") and value > _LONGEST_US:
            expected = "a time in µs, below 1e13 (116 days)"
        elif not (value < low or (column == "step_time_us" and value == 0)):
            continue
        raise PerfgateError(f"{where}: key '{key}.{index}' is {value!r} (expected {expected})")


# Columns that label steps rather than measure them: whole numbers, rounds and processes
# from 0 (they group the rounds of the decision).
_LABEL_COLUMNS = ("step", "round", "process")
_LARGEST_LABEL = 2**53  # exact as a JSON number and as a float


def _check_labels(values: list[Any] | None, key: str, where: str) -> None:
    if not values:
        return
    lowest = -_LARGEST_LABEL if key.endswith(".step") else 0
    for index, value in enumerate(values):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and lowest <= value < _LARGEST_LABEL and value == int(value)):
            kind = "an integer" if lowest < 0 else "an integer from 0"
            raise PerfgateError(
                f"{where}: key '{key}.{index}' is {value!r} (expected {kind}: it labels the steps)"
            )


def _upgrade_v1(document: dict[str, Any]) -> dict[str, Any]:
    """A version 1 record in the version 2 shape: its gated step times become one round."""
    samples = document.get("samples")
    # Not a mapping ("samples": "abc"): left for the schema to refuse with one line.
    if isinstance(samples, dict) and "profiled_step_time_us" in samples:
        samples = dict(samples)
        gated = samples.get("step_time_us", [])
        samples["step_time_us"] = samples.pop("profiled_step_time_us")
        return {**document, "samples": samples, "timing": {"step_time_us": gated}}
    return document


def validate_run(value: object, where: str) -> RunRecord:
    """A run record, checked (``where`` names it in errors)."""
    run: RunRecord = validated(_RUN, value, where)
    _check_rounds(run, where)
    return run


def validate_baseline(value: object, where: str) -> BaselineRecord:
    """A baseline document, checked: format, version, names, commit, samples, operators."""
    _check_format(value, where, BASELINE_FORMAT, BASELINE_FORMAT_VERSION)
    assert isinstance(value, dict)
    if value["format_version"] == 1:
        value = _upgrade_v1(value)
    record: BaselineRecord = validated(_BASELINE, value, where)
    if not record.get("commit"):
        raise PerfgateError(
            f"{where}: key 'commit' is missing (expected a full lowercase commit sha)"
        )
    _check_rounds(record, where)
    return record


def validate_results(value: object, where: str) -> ResultsDocument:
    """A results document, checked; each run gets the document's commit when it has none."""
    _check_format(value, where, RESULTS_FORMAT, RESULTS_FORMAT_VERSION)
    assert isinstance(value, dict)
    if value["format_version"] == 1 and isinstance(value.get("runs"), list):
        value = {
            **value,
            "runs": [_upgrade_v1(r) if isinstance(r, dict) else r for r in value["runs"]],
        }
    document: ResultsDocument = validated(_RESULTS, value, where)
    first_of: dict[tuple[str, str], int] = {}
    for index, run in enumerate(document["runs"]):
        _check_rounds(run, f"{where}: runs[{index}]")
        # Two runs of one benchmark on one runner would both be gated and recorded to one
        # baseline file, the last silently winning.
        key = (run["benchmark"], run["env"])
        if key in first_of:
            raise PerfgateError(
                f"{where}: runs[{index}]: benchmark {key[0]!r} on {key[1]!r} is already "
                f"runs[{first_of[key]}] (expected one run of each benchmark on each env)"
            )
        first_of[key] = index
        # The doors read one or the other (the HTML page the run's, the tables the
        # comparison's): a file where they differ was edited, and would get two answers.
        said = getattr(run.get("verdict"), "value", run.get("verdict"))  # an enum, validated
        judged = (
            comparison.get("verdict")
            if isinstance(comparison := run.get("comparison"), dict)
            else None
        )
        if said is not None and judged is not None and said != judged:
            raise PerfgateError(
                f"{where}: runs[{index}]: verdict {said!r} differs from its comparison's "
                f"{judged!r} (expected a results file as perfgate wrote it)"
            )
        named = comparison.get("benchmark") if isinstance(comparison, dict) else None
        if isinstance(named, str) and named != run["benchmark"]:
            raise PerfgateError(
                f"{where}: runs[{index}]: benchmark {run['benchmark']!r} holds the comparison "
                f"of {named!r} (expected a results file as perfgate wrote it)"
            )
        if run.get("commit") is None and document.get("commit"):
            run["commit"] = document["commit"]
    return document


# A results file of 100 benchmarks with their timelines is a few MB; a baseline tens of KB.
MAX_JSON_BYTES = 256 * 2**20


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_of_distinct_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (json would keep the last)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return value


def read_json(path: Path, what: str) -> object:
    """The decoded JSON value of ``path`` (a ``what``: "baseline", "results file" …), or one
    error line: missing, unreadable, not UTF-8, not JSON, nested too deep."""
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_JSON_BYTES:
                data = handle.read()
            else:  # a device or a pipe (/dev/zero) may never end: no more than the cap
                data = handle.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise PerfgateError(
                f"{path}: over {MAX_JSON_BYTES >> 20} MiB; no {what} that perfgate writes is "
                "that large (expected a file that perfgate wrote)"
            )
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise PerfgateError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise PerfgateError(f"{path}: is a directory, not a {what}") from None
    except UnicodeDecodeError as exc:
        raise PerfgateError(f"{path}: not a {what} (not UTF-8 text at byte {exc.start})") from None
    except OSError as exc:
        raise PerfgateError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    try:
        value = json.loads(text, object_pairs_hook=_object_of_distinct_keys)
    except _RepeatedKey as exc:
        # json keeps the last of a key given twice: a hand or union merge of two files
        # would silently serve one of them.
        raise PerfgateError(
            f"{path}: key {exc.key!r} is given twice in one object (expected each key once, "
            f"as perfgate writes a {what})"
        ) from None
    except json.JSONDecodeError as exc:
        # json's messages end in " at" where they give the place apart ("Unterminated string
        # starting at"): the place is said first, the message ends as a phrase.
        said = exc.msg.removesuffix(" at").removesuffix(" starting")
        raise PerfgateError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {said}"
        ) from None
    except RecursionError:
        raise PerfgateError(f"{path}: JSON nested too deep to be a {what}") from None
    # JSON may escape half of a UTF-16 pair ("\ud800") where no text can hold it: such a
    # string could be neither printed nor written back as UTF-8. perfgate never writes one.
    if "\\u" in text and (where := _lone_surrogate(value)) is not None:
        raise PerfgateError(
            f"{path}: key {where!r} holds a lone UTF-16 surrogate escape (\\ud800–\\udfff), "
            f"which is no text (perfgate never writes one)"
        )
    return value


def _lone_surrogate(value: Any) -> str | None:
    """The dotted key of the first string (or key) in ``value`` that holds a lone
    surrogate, or None."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            if not encodes_as_utf8(node):
                return at or "(top level)"
        elif isinstance(node, dict):
            for key, child in node.items():
                name = f"{at}.{key}" if at else str(key)
                if not encodes_as_utf8(key):
                    return name.encode("utf-8", "backslashreplace").decode()
                stack.append((child, name))
        elif isinstance(node, list):
            stack.extend((child, f"{at}.{i}" if at else str(i)) for i, child in enumerate(node))
    return None


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_number(value: object, digits: int | None = None) -> float | None:
    """A float for JSON: ``None`` for NaN and infinities (JSON has neither), optionally
    rounded to ``digits`` decimals."""
    if value is None or isinstance(value, bool):
        return None
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        return None
    return round(number, digits) if digits is not None else number


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinity (nested in dicts, lists and tuples) as ``None``:
    what strict JSON (``allow_nan=False``) can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def json_text(document: Any) -> str:
    """A document as the CLI writes JSON: strict (non-finite numbers as null), indented, with
    a final newline."""
    return json.dumps(finite_json(document), indent=2, allow_nan=False) + "\n"


def merge_processes(record: RunRecord, others: Sequence[RunRecord]) -> RunRecord:
    """One record of a benchmark measured in several processes: this one's metadata,
    everyone's rounds and profiled passes (each labelled with its process), and the operator
    tables of all of them as one (:func:`_merged_operators`)."""
    merged: RunRecord = {**record}
    loads = [
        runner.get("load")
        for r in (record, *others)
        if isinstance(runner := r.get("runner"), dict) and runner.get("load")
    ]
    if loads:
        merged["runner"] = {"load": loads[0], "loads": loads}  # type: ignore[typeddict-unknown-key]
    timing = _concatenate([r.get("timing") or {} for r in (record, *others)])
    if timing:
        merged["timing"] = timing
    merged["samples"] = _concatenate([r["samples"] for r in (record, *others)])
    if others:
        merged["operators"] = _merged_operators(
            [r.get("operators") or [] for r in (record, *others)]
        )
    return merged


def _merged_operators(tables: Sequence[Sequence[OperatorEntry]]) -> list[OperatorEntry]:
    """The operator tables of several processes as one: calls, time and share per step are
    the processes' means (an operator a process did not run counts 0 there), each process's
    time is kept (``process_times_us``), and the per-step samples are every process's, in
    process order, where every process has them (else the first process's, as before)."""
    by_key: dict[tuple[str, str], list[OperatorEntry | None]] = {}
    for i, table in enumerate(tables):
        for row in table:
            slots = by_key.setdefault((row["op_type"], row["core"]), [None] * len(tables))
            slots[i] = row
    merged = [_merged_operator(rows) for rows in by_key.values()]
    merged.sort(key=lambda e: -float(e["time_per_step_us"] or 0.0))
    return merged[:MAX_OPERATORS]


def _merged_operator(rows: list[OperatorEntry | None]) -> OperatorEntry:
    """One operator's rows of every process (None where a process did not run it)."""
    first = next(row for row in rows if row is not None)

    def per_process(field: Literal["calls_per_step", "time_per_step_us", "share"]) -> list[float]:
        return [float(row[field] or 0.0) if row is not None else 0.0 for row in rows]

    times = per_process("time_per_step_us")
    entry: OperatorEntry = {
        "op_type": first["op_type"],
        "core": first["core"],
        "calls_per_step": sum(per_process("calls_per_step")) / len(rows),
        "time_per_step_us": sum(times) / len(rows),
        "share": sum(per_process("share")) / len(rows),
        "process_times_us": times,
    }
    if "category" in first:
        entry["category"] = first["category"]
    samples = [row.get("samples_us") if row is not None else None for row in rows]
    if all(samples):
        entry["samples_us"] = [value for part in samples for value in part or []]
    elif rows[0] is not None and "samples_us" in rows[0]:
        entry["samples_us"] = rows[0]["samples_us"]
    return entry


def _concatenate(tables: Sequence[dict[str, list[float | None]]]) -> dict[str, list[float | None]]:
    """Tables of per-step columns one after the other; a column a table lacks is None there."""
    names = list(dict.fromkeys(name for table in tables for name in table))
    out: dict[str, list[float | None]] = {name: [] for name in names}
    for table in tables:
        size = len(next(iter(table.values()))) if table else 0
        for name in names:
            out[name].extend(table.get(name, [None] * size))
    return out
