"""Mutation fuzzing of the store's side: a real baseline file, poisoned, given to
``perfgate compare``; a real results file, poisoned, given to ``perfgate report`` and to
``perfgate baseline update`` (whose baselines must then compare). The
promise is the readers' (docs/reliability.md): exit 0 or 1 with strict JSON, or exit 2 with
one line naming the file; never a traceback.

Hypothesis walks into the document (a random path of keys and indexes) and replaces, deletes
or grows what it finds with hostile values (NaN, 1e308, 2**64, lone surrogates, wrong
types), or cuts the file short; either side of a comparison may be the poisoned one.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate.cli import main
from perfgate.gate import BASELINE_CONTENT

RECORDS = Path(__file__).parent / "data" / "records"
RECORD = RECORDS / "input_pipeline.baseline.json"
# What `PERFGATE_EXAMPLE_REGRESSION=host_copy pytest --perfgate examples/` wrote against
# baselines of its commit: three runs, each a regression with its comparison.
RESULTS = RECORDS / "host_copy.results.json"
HOSTILE: list[Any] = [
    None,
    True,
    -1,
    0,
    1.5,
    -1e308,
    1e308,
    float("nan"),
    float("inf"),
    2**64,
    -(2**63),
    "",
    "text",
    "\ud800",
    "x" * 5000,
    [],
    [None],
    [1e308, -1],
    {},
    {"a": [1]},
    [[[[[]]]]],
]


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def results_record(benchmark: str) -> dict[str, Any]:
    """One run of the results file as the baseline ``perfgate baseline update`` stores, with
    the baseline file's header (cnn_train carries a small-kernels hint, the baseline file an
    idle-gaps one)."""
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    run = next(r for r in document["runs"] if r["benchmark"] == benchmark)
    header = json.loads(RECORD.read_text(encoding="utf-8"))
    return {
        **{k: header[k] for k in ("format", "format_version", "commit", "branch", "dirty")},
        **{k: v for k, v in run.items() if k in BASELINE_CONTENT},
    }


RECORD_SOURCES = {"input_pipeline": RECORD, "cnn_train": None}


def _document(source: Path | None) -> Any:
    if source is None:
        return results_record("cnn_train")
    return json.loads(source.read_text(encoding="utf-8"))


@st.composite
def poisoned(draw: st.DrawFn, source: Path | None = RECORD) -> tuple[Any, str]:
    """The document at ``source`` (None: cnn_train's record) with one thing changed, and what."""
    record = _document(source)
    node: Any = record
    path: list[str | int] = []
    while True:
        keys: list[Any] = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, (dict, list)) or not child or draw(st.integers(0, 2)) == 0:
            break
        node, path = child, [*path, key]
    where = "/".join(str(p) for p in path)
    action = draw(st.sampled_from(["replace", "delete", "grow"]))
    value = draw(st.sampled_from(HOSTILE))
    if not keys:
        action = "grow"
    if action == "grow" and isinstance(node, list):
        node.append(value)
        return record, f"{where}: append {value!r:.40}"
    if action == "grow":
        node["extra_key"] = value
        return record, f"{where}: add extra_key {value!r:.40}"
    if action == "delete":
        del node[key]
        return record, f"{where}/{key}: deleted"
    node[key] = value
    return record, f"{where}/{key} = {value!r:.40}"


def _write(path: Path, record: Any) -> None:
    # json.dumps writes NaN/Infinity and lone surrogates (as \ud800): both are hostile input.
    path.write_text(json.dumps(record), encoding="utf-8")


def fuzz_settings(cases: int) -> settings:
    """The same cases every run (a CI failure replays), no example database."""
    return settings(
        max_examples=cases,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def assert_one_error_line(rc: int, stderr: str, file_name: str, change: str) -> None:
    lines = stderr.strip().splitlines()
    assert rc == 2, (change, rc, stderr[:500])
    assert len(lines) == 1 and lines[0].startswith("perfgate: error: "), (change, lines)
    assert file_name in lines[0], (change, lines[0])


@fuzz_settings(150)
@given(
    case=st.sampled_from(list(RECORD_SOURCES.values())).flatmap(
        lambda source: st.tuples(st.just(source), poisoned(source))
    ),
    poison_current=st.booleans(),
    cut=st.integers(0, 9),
    form=st.sampled_from(["json", "json", "table", "md"]),
)
def test_a_poisoned_baseline_file_is_one_error_line_or_a_verdict(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[Path | None, tuple[Any, str]],
    poison_current: bool,
    cut: int,
    form: str,
) -> None:
    source, (record, change) = case
    folder = tmp_path_factory.mktemp("records")
    baseline, current = folder / "baseline.json", folder / "current.json"
    clean = json.dumps(_document(source)).encode()
    baseline.write_bytes(clean)
    current.write_bytes(clean)
    poisoned_file = current if poison_current else baseline
    _write(poisoned_file, record)
    if cut == 0:  # a file cut short as a full disk or a killed writer leaves it
        data = poisoned_file.read_bytes()
        poisoned_file.write_bytes(data[: len(data) // 2])
        change += " (and cut in half)"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["compare", str(baseline), str(current), "--format", form])
    if rc in (0, 1) and form != "json":
        assert out.getvalue().strip() and not err.getvalue().strip(), change
        return
    if rc in (0, 1):
        document = _strict(out.getvalue())
        assert document["verdict"] in {
            "pass",
            "regression",
            "improvement",
            "unstable",
            "incomparable",
            "no-baseline",
        }, change
        return
    assert_one_error_line(rc, err.getvalue(), poisoned_file.name, change)


@fuzz_settings(100)
@given(
    case=poisoned(RESULTS),
    form=st.sampled_from(["json", "table", "md", "json", "table", "md", "html"]),
    cut=st.integers(0, 9),
)
def test_a_poisoned_results_file_is_one_error_line_or_a_report(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[Any, str], form: str, cut: int
) -> None:
    document, change = case
    results = tmp_path_factory.mktemp("results") / "results.json"
    _write(results, document)
    if cut == 0:
        data = results.read_bytes()
        results.write_bytes(data[: len(data) // 2])
        change += " (and cut in half)"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["report", str(results), "--format", form])
    if rc in (0, 1):
        assert out.getvalue().strip(), change
        if form == "json":
            _strict(out.getvalue())
        return
    assert_one_error_line(rc, err.getvalue(), results.name, change)


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("samples.process", None, "expected an integer from 0"),
        ("timing.round", 1.5, "expected an integer from 0"),
        ("timing.process", -1, "expected an integer from 0"),
        ("samples.step", 2.5, "expected an integer"),
    ],
)
def test_a_step_label_that_is_no_whole_number_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: Any, expected: str
) -> None:
    # Found by the fuzzing above: samples.process[0] = null raised TypeError in the decision.
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    table, key = column.split(".")
    record[table][key][0] = value
    baseline = tmp_path / "baseline.json"
    _write(baseline, record)
    assert main(["compare", str(baseline), str(RECORD), "--format", "json"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"perfgate: error: {baseline}: key '{column}.0' is {value!r}")
    assert expected in line


def test_a_record_without_a_metric_column_compares_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by the fuzzing above: samples.utilization deleted raised IndexError (the round
    # labels of 60 steps against no values); a record that did not measure a metric says so.
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    del record["samples"]["utilization"]
    baseline = tmp_path / "baseline.json"
    _write(baseline, record)
    assert main(["compare", str(baseline), str(RECORD), "--format", "json"]) == 0
    (benchmark,) = _strict(capsys.readouterr().out)["benchmarks"]
    status = {m["name"]: m["status"] for m in benchmark["metrics"]}
    assert status["utilization"] == "n/a"
    assert status["copy_ratio"] == status["free_ratio"] == "pass"
    # The record against itself: no change, but this VM's recorded noise between processes
    # (±17%) is past the +5% limit, so step time cannot pass.
    assert status["step_time"] == "unstable"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda c: c.pop("verdict"), "runs.0.comparison.verdict"),
        (lambda c: c.update(verdict=None), "runs.0.comparison.verdict"),
        (lambda c: c.pop("benchmark"), "runs.0.comparison.benchmark"),
        (lambda c: c["metrics"][0].update(noise="text"), "runs.0.comparison.metrics.0.noise"),
        # A unit the renderers do not know raised ValueError from format_change.
        (lambda c: c["metrics"][0].update(unit="furlongs"), "runs.0.comparison.metrics.0.unit"),
        # A p-value that no test gives printed "<1e-300".
        (lambda c: c["metrics"][0].update(p_value=-1), "runs.0.comparison.metrics.0.p_value"),
        # A limit perfgate never writes was printed as the limit ("limit banana").
        (
            lambda c: c["metrics"][1].update(threshold="banana"),
            "runs.0.comparison.metrics.1.threshold",
        ),
        # Another unit than the change's, or the good direction's sign.
        (
            lambda c: c["metrics"][0].update(threshold="+3pt"),
            "runs.0.comparison.metrics.0.threshold",
        ),
        (
            lambda c: c["metrics"][0].update(threshold="-5%"),
            "runs.0.comparison.metrics.0.threshold",
        ),
        (
            lambda c: c["operators"][1].update(delta_us=[1]),
            "runs.0.comparison.operators.1.delta_us",
        ),
        (lambda c: c["baseline"].update(commit=123), "runs.0.comparison.baseline.commit"),
    ],
)
@pytest.mark.parametrize("form", ["table", "html"])
def test_a_damaged_comparison_in_a_results_file_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Any,
    key: str,
    form: str,
) -> None:
    # Found by the fuzzing above: a comparison without its verdict or benchmark raised
    # KeyError / ValueError in perfgate report; its facts were not checked at all.
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    change(document["runs"][0]["comparison"])
    results = tmp_path / "results.json"
    _write(results, document)
    assert main(["report", str(results), "--format", form]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"perfgate: error: {results}: key '{key}' ")
    assert not captured.out  # nothing half-written


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty git repository with one commit: where ``baseline update`` writes."""
    import git

    folder = tmp_path_factory.mktemp("repository")
    repo = git.Repo.init(folder)
    with repo.config_writer() as config:
        config.set_value("user", "name", "perfgate tests")
        config.set_value("user", "email", "tests@perfgate.invalid")
    repo.index.commit("empty")
    return folder


@fuzz_settings(40)
@given(case=poisoned(RESULTS), cut=st.integers(0, 9))
def test_a_poisoned_results_file_records_nothing_or_baselines_that_compare(
    repository: Path, case: tuple[Any, str], cut: int
) -> None:
    """``perfgate baseline update --from`` a poisoned results file: one error line and
    nothing written, or baselines that ``perfgate compare`` then reads and renders."""
    document, change = case
    results = repository.parent / f"{repository.name}-results.json"
    _write(results, document)
    if cut == 0:
        data = results.read_bytes()
        results.write_bytes(data[: len(data) // 2])
        change += " (and cut in half)"
    store = repository / "baselines"
    shutil.rmtree(store, ignore_errors=True)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        update = ["baseline", "update", "--repo", str(repository), "--from", str(results)]
        rc = main([*update, "--allow-other-commit"])
    written = sorted(store.rglob("*.json")) if store.exists() else []
    if rc != 0:
        assert not written, change  # nothing half-written
        assert_one_error_line(rc, err.getvalue(), results.name, change)
        return
    assert written, change
    for baseline in written:
        for form in ("table", "json"):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(["compare", str(baseline), str(baseline), "--format", form])
            assert rc in (0, 1), (change, form, err.getvalue()[:300])
            assert out.getvalue().strip(), (change, form)


def test_a_stored_hint_missing_an_item_fact_is_left_out_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by the fuzzing above: a results file whose small-kernels hint had lost its
    # items' "kernels" was recorded, and every table of that baseline raised KeyError.
    record = results_record("cnn_train")
    baseline = tmp_path / "baseline.json"
    _write(baseline, record)
    assert main(["compare", str(baseline), str(baseline)]) in (0, 1)
    assert "- small-kernel runs: " in capsys.readouterr().out  # the hint, undamaged
    [small] = [h for h in record["advice"] if h["rule"] == "small_kernels"]
    del small["items"][0]["kernels"]
    _write(baseline, record)
    assert main(["compare", str(baseline), str(baseline)]) in (0, 1)
    captured = capsys.readouterr()
    assert "small-kernel runs" not in captured.out and not captured.err
    assert "step_time" in captured.out  # the rest of the report is there


def test_a_lone_surrogate_in_a_results_file_is_one_line_and_nothing_recorded(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by fuzzing baseline update: "\ud800" in a run's parameters passed every check,
    # then the baseline could not be written as UTF-8 (UnicodeEncodeError). JSON can escape
    # half a surrogate pair; no text holds one, and a terminal cannot print it.
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    document["runs"][0]["parameters"]["note"] = "\ud800"
    results = repository.parent / "surrogate-results.json"
    _write(results, document)
    assert "\\ud800" in results.read_text(encoding="utf-8")  # valid UTF-8, valid JSON
    shutil.rmtree(repository / "baselines", ignore_errors=True)
    update = ["baseline", "update", "--repo", str(repository), "--from", str(results)]
    assert main([*update, "--allow-other-commit"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"perfgate: error: {results}: key 'runs.0.parameters.note' holds a lone UTF-16 "
        "surrogate escape (\\ud800–\\udfff), which is no text (perfgate never writes one)"
    )
    assert not (repository / "baselines").exists()
    # A whole pair is a character like any other.
    document["runs"][0]["parameters"]["note"] = "\ud83d\ude00"
    _write(results, document)
    assert main([*update, "--allow-other-commit"]) == 0


@pytest.mark.parametrize(
    ("column", "values", "expected"),
    [
        # Each of these made `perfgate compare` pass the step time unjudged (n/a), exit 0.
        ("timing.step_time_us", None, "is null (expected the round's measured step time"),
        ("timing.step_time_us", 0.0, "expected a step time in µs, above 0"),
        ("timing.step_time_us", -34122.0, "expected a step time in µs, above 0"),
        # Decided a verdict on a time of 10^300 µs, or a utilization of -100%.
        ("timing.step_time_us", 1e300, "expected a time in µs, below 1e13 (116 days)"),
        ("samples.utilization", -1.0, "expected a ratio from 0"),
        ("samples.copy_us", -5.0, "expected a time in µs, from 0"),
    ],
)
def test_impossible_measures_in_a_results_file_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, values: Any, expected: str
) -> None:
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    table, key = column.split(".")
    run = document["runs"][0]
    run[table][key] = [values] * len(run[table][key])
    damaged = tmp_path / "results.json"
    _write(damaged, document)
    assert main(["compare", str(RESULTS), str(damaged), "--format", "json"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"perfgate: error: {damaged}: runs[0]: key '{column}.0' is ")
    assert expected in line


def test_a_comparison_of_another_benchmark_in_a_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The table showed the comparison's name, the HTML page the run's: two answers.
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    run = document["runs"][0]
    run["comparison"]["benchmark"] = "other"
    results = tmp_path / "results.json"
    _write(results, document)
    for form in ("table", "html"):
        assert main(["report", str(results), "--format", form]) == 2
        captured = capsys.readouterr()
        assert captured.err == (
            f"perfgate: error: {results}: runs[0]: benchmark {run['benchmark']!r} holds the "
            "comparison of 'other' (expected a results file as perfgate wrote it)\n"
        )
        assert not captured.out
