"""The `perfgate` command as users run it: exit codes, one-line errors, real profiles."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import git
import pytest
from conftest import GitRepo

from perfgate.cli import main

DATA = Path(__file__).parent / "data"
LEVEL1 = DATA / "torch_npu" / "ascend-msinsight" / "pytorch_text_level1_rank0_ascend_pt"


def slow_down(profile: Path, out: Path, op_type: str, extra_us: float) -> Path:
    """A copy of a torch_npu text profile whose ``op_type`` kernels each ran ``extra_us``
    longer: later kernels start later, and the step's Computing grows by the added time,
    as torch_npu would have written it."""
    shutil.copytree(profile, out)
    kernels = out / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    text = kernels.read_bytes().decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    type_col, start_col, dur_col = (
        header.index("Type"),
        header.index("Start Time(us)"),
        header.index("Duration(us)"),
    )
    order = sorted(range(1, len(rows)), key=lambda i: float(rows[i][start_col].strip()))
    shift = 0.0
    added = 0.0
    for i in order:
        row = rows[i]
        start = float(row[start_col].strip()) + shift
        row[start_col] = f"{start:.3f}\t"  # keep the TAB torch_npu writes
        if row[type_col] == op_type:
            row[dur_col] = f"{float(row[dur_col]) + extra_us:.3f}"
            shift += extra_us
            added += extra_us
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    kernels.write_bytes(buffer.getvalue().encode("utf-8"))
    steps = out / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    step_rows = list(csv.reader(io.StringIO(steps.read_bytes().decode("utf-8"))))
    computing = step_rows[0].index("Computing")
    step_rows[1][computing] = str(float(step_rows[1][computing]) + added)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(step_rows)
    steps.write_bytes(buffer.getvalue().encode("utf-8"))
    return out


def test_inspect_json_gives_the_documented_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(LEVEL1), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["schema_version"]) == ("perfgate.inspect", 1)
    # step 50 = Preparing + Computing + Communication(Not Overlapped) + Free
    #         = 17902.5 + 8873.756 + 101963.203 + 25744.05 = 154483.509 µs
    assert doc["metrics"]["step_time_us"]["median"] == pytest.approx(154483.509)
    assert doc["metrics"]["utilization"]["median"] == pytest.approx(8873.756 / 154483.509)
    assert round(doc["metrics"]["utilization"]["median"] * 100, 2) == 5.74
    assert doc["metrics"]["comm_ratio"]["median"] == pytest.approx(101963.203 / 154483.509)
    assert set(doc["metrics"]) == {
        "step_time_us",
        "utilization",
        "copy_ratio",
        "comm_ratio",
        "free_ratio",
    }
    assert set(doc["metrics"]["copy_ratio"]) == {"median", "mean", "min", "max", "std", "n"}
    matmul = next(o for o in doc["operators"] if o["op_type"] == "MatMulV2")
    assert matmul["core"] == "AI_CORE"
    assert matmul["calls_per_step"] == 8
    assert set(matmul) >= {"op_type", "core", "calls_per_step", "time_per_step_us", "share"}


def test_inspect_table_names_step_time_and_top_operators(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["inspect", str(LEVEL1)]) == 0
    out = capsys.readouterr().out
    assert "step time: median 154.484 ms" in out
    assert "top operators (10 of" in out
    assert "MatMulV2" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "no/such/dir"], "perfgate: error: no/such/dir: no such file or directory"),
        (["compare", "a", "b", "c"], "perfgate: error: compare takes at most two paths"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_unknown_layout_is_one_line_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perfgate: error: {tmp_path}: not a profile layout perfgate knows")
    assert err.count("\n") == 1


def test_perfgate_s_own_outputs_given_to_inspect_say_what_to_run_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A newcomer's tries: the plugin's folder of profiles and its results file, each
    # answered with the whole list of layouts and nothing else.
    records = Path(__file__).parent / "data" / "records"
    profiles = tmp_path / "perfgate-out" / "profiles"
    trace = Path(__file__).parent / "data" / "kineto" / "sampled_rank-0.json.gz"
    for name in ("cnn_train", "input_pipeline"):
        (profiles / name).mkdir(parents=True)
        shutil.copy(trace, profiles / name / "trace.json.gz")
    shutil.copy(records / "host_copy.results.json", profiles.parent / "results.json")
    said = {
        profiles: "it holds the profiles of 2 folder(s) (cnn_train/, input_pipeline/): "
        f"inspect one, e.g. `perfgate inspect {profiles / 'cnn_train'}`",
        records / "host_copy.results.json": "it is a perfgate results file: show it with "
        f"`perfgate report {records / 'host_copy.results.json'}`",
        records / "input_pipeline.baseline.json": "it is a perfgate baseline: "
        "`perfgate baseline show` prints it",
        # One level up, the plugin's output folder, with the run's results.
        profiles.parent: "it holds the profiles of 2 folder(s) (profiles/cnn_train/, "
        f"profiles/input_pipeline/): inspect one, e.g. `perfgate inspect {profiles / 'cnn_train'}`"
        f"; the run's results: `perfgate report {profiles.parent / 'results.json'}`",
    }
    for path, hint in said.items():
        assert main(["inspect", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(
            f"perfgate: error: {path}: not a profile layout perfgate knows; {hint}"
        ), err
        assert err.count("\n") == 1
    assert main(["inspect", str(profiles / "cnn_train")]) == 0


def test_a_link_to_nothing_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")  # a loop
    (tmp_path / "gone").symlink_to(tmp_path / "profile-deleted")
    for link in ("one", "gone"):
        assert main(["inspect", str(tmp_path / link)]) == 2
        assert capsys.readouterr().err == (
            f"perfgate: error: {tmp_path / link}: a symbolic link to nothing (its target is "
            "missing, or loops)\n"
        )


def test_a_bug_is_exit_2_with_the_traceback_never_1_which_reads_as_a_regression(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import perfgate.cli

    def broken(args: object) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(perfgate.cli, "_cmd_inspect", broken)
    assert main(["inspect", str(LEVEL1)]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'a bug'" in err
    assert err.splitlines()[-1] == (
        "perfgate: internal error: KeyError (a bug in perfgate; please report it with the "
        "traceback above)"
    )


def test_running_out_of_memory_is_an_error_line_not_a_bug_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import perfgate.cli

    def too_big(args: object) -> int:
        raise MemoryError

    monkeypatch.setattr(perfgate.cli, "_cmd_inspect", too_big)
    assert main(["inspect", str(LEVEL1)]) == 2
    assert capsys.readouterr().err == (
        "perfgate: error: out of memory: the input is too large for the memory this process "
        "may use\n"
    )


def test_a_json_input_without_end_is_refused_at_the_size_cap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import perfgate.records

    # /dev/zero never ends: read whole, it took all memory (MemoryError after 3 GB here).
    monkeypatch.setattr(perfgate.records, "MAX_JSON_BYTES", 1 << 20)
    assert main(["report", "/dev/zero"]) == 2
    assert capsys.readouterr().err == (
        "perfgate: error: /dev/zero: over 1 MiB; no results file that perfgate writes is that "
        "large (expected a file that perfgate wrote)\n"
    )


def test_bad_option_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["inspect", str(LEVEL1), "--format", "xml"])
    assert excinfo.value.code == 2
    assert "argument --format: invalid choice: 'xml'" in capsys.readouterr().err


def test_a_profile_compared_with_itself_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(LEVEL1), str(LEVEL1)]) == 0
    out = capsys.readouterr().out
    assert "verdict: PASS" in out


def test_a_metric_one_side_lacks_shows_the_other_side_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The same model's torch_npu .db (copies recorded: 24 MEMCPY_ASYNC, 866.7 µs of a
    # 151.889 ms step) against its text export without trace_view.json (kernels only).
    db = DATA / "ascend_db" / "pytorch_db_level1_rank0_ascend_pt"
    text = DATA / "ascend_db" / "pytorch_text_level1_rank0_ascend_pt"
    assert main(["compare", str(db), str(text), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    copy = next(m for m in doc["metrics"] if m["name"] == "copy_ratio")
    assert copy["status"] == "n/a"
    assert copy["baseline"] == pytest.approx(866.7 / 151889.0, rel=1e-3)
    assert copy["current"] is None and copy["change"] is None
    assert (
        "current: copy tasks are not recorded in this export (kernels only): copy_ratio is unknown"
    ) in doc["benchmarks"][0]["notes"]


def test_slowed_matmul_kernels_fail_the_gate_and_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8 MatMulV2 calls × 2 ms = +16 ms on a 154.48 ms step: +10.4%, past the +5% limit.
    slowed = slow_down(LEVEL1, tmp_path / "slowed_ascend_pt", "MatMulV2", 2000.0)
    assert main(["compare", str(LEVEL1), str(slowed), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "regression"
    step = next(m for m in doc["metrics"] if m["name"] == "step_time")
    assert step["baseline"] == pytest.approx(154483.509)
    assert step["current"] == pytest.approx(154483.509 + 16000.0)
    assert step["status"] == "regression"
    assert step["test"] == "effect-only"  # one step a side: no significance test possible
    top = doc["operators"][0]
    assert (top["op_type"], top["core"]) == ("MatMulV2", "AI_CORE")
    assert top["delta_us"] == pytest.approx(16000.0)
    assert top["share_of_step_delta"] == pytest.approx(1.0)
    [line] = doc["summary"]
    assert "step_time regressed: 154.484 ms → 170.484 ms (+10.4%, limit +5%)" in line
    explained = "explained by MatMulV2 [AI_CORE] +16.000 ms/step, 100% of the profiled step's"
    assert f"{explained} +16.0 ms increase" in line


def _git_repo(path: Path) -> git.Repo:
    return GitRepo(path).repo


def _write_results(path: Path, commit: str, runs: list[Any], **document: Any) -> Path:
    """A results file (perfgate.results v2) of ``runs``, each measured at ``commit``."""
    measured = [{**run, "commit": commit} for run in runs]
    path.write_text(
        json.dumps(
            {"format": "perfgate.results", "format_version": 2, "commit": commit, **document}
            | {"runs": measured}
        )
    )
    return path


def _repo_with_a_model(repo_dir: Path) -> tuple[git.Repo, str]:
    """A repository whose one commit adds model.py; the commit's sha."""
    repo = _git_repo(repo_dir)
    (repo_dir / "model.py").write_text("v1\n")
    repo.index.add(["model.py"])
    return repo, repo.index.commit("model v1").hexsha


def test_from_a_subfolder_the_cli_uses_the_projects_settings_and_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _ = _repo_with_a_model(tmp_path)
    (tmp_path / "perfgate.yaml").write_text("baseline: {dir: perf/baselines}\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_x.py").write_text("")
    repo.index.add(["perfgate.yaml", "bench/test_x.py"])
    repo.index.commit("settings")
    # Run in bench/, the CLI read bench/perfgate.yaml (none: defaults) and wrote
    # bench/baselines/, which no gate reads; pytest --perfgate takes the project's.
    monkeypatch.chdir(tmp_path / "bench")
    assert main(["baseline", "update", "--from", str(LEVEL1), "--benchmark", "resnet"]) == 0
    [written] = (tmp_path / "perf" / "baselines" / "resnet").rglob("*.json")
    assert capsys.readouterr().out == f"recorded {written}\n"
    assert not (tmp_path / "bench" / "baselines").exists()
    repo.index.add([str(written.relative_to(tmp_path))])
    repo.index.commit("perfgate: baselines")
    assert main(["compare", str(LEVEL1), "--benchmark", "resnet", "--format", "json"]) in (0, 1)
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert judged["verdict"] != "no-baseline"
    assert judged["baseline"]["path"] == str(written)
    # A folder that is not there is said, not read as an empty store.
    assert main(["baseline", "list", "--repo", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == (
        f"perfgate: error: {tmp_path / 'nowhere'}: no such directory (expected a checkout of "
        "the project)\n"
    )


def test_a_results_file_is_compared_with_the_baseline_of_the_commit_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfgate.sides import load_side

    repo, first = _repo_with_a_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    record_first = ["baseline", "update", "--from", str(LEVEL1), "--benchmark", "resnet"]
    assert main(record_first) == 0
    repo.git.add("-A")
    repo.index.commit("perfgate: baselines")
    repo.git.checkout("-q", "-b", "feature")
    (tmp_path / "model.py").write_text("v2\n")
    repo.index.add(["model.py"])
    measured = repo.index.commit("model v2").hexsha
    [record] = load_side(LEVEL1, benchmark="resnet").records
    results = _write_results(tmp_path / "results.json", measured, [{**record, "verdict": "pass"}])
    # main moves on and records another baseline; the results file is compared with main
    # checked out (a later job, a person on their machine).
    repo.git.checkout("-q", "main")
    (tmp_path / "model.py").write_text("v3\n")
    repo.index.add(["model.py"])
    later = repo.index.commit("model v3").hexsha
    assert main(record_first) == 0
    repo.git.add("-A")
    repo.index.commit("perfgate: baselines")
    capsys.readouterr()
    assert main(["compare", str(results), "--format", "json"]) in (0, 1)
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    # It took main's newest baseline (`later`, "first parents of HEAD on main"): not what
    # the plugin compared the run with when it measured it.
    assert judged["baseline"]["commit"] == first != later
    assert judged["baseline"]["how"] == f"merge-base of {measured[:12]} (measured) and main"
    # A measured commit this clone lacks (rebased away, beyond a shallow clone): HEAD, said.
    gone = "f" * 40
    _write_results(results, gone, [{**record, "verdict": "pass"}])
    assert main(["compare", str(results), "--format", "json"]) in (0, 1)
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert judged["baseline"]["commit"] == later
    assert judged["baseline"]["how"] == (
        "first parents of HEAD (the measured ffffffffffff is not in this repository) on main"
    )
    # --baseline-ref names the start whatever was measured (it was the same error).
    assert main(["compare", str(results), "--baseline-ref", first, "--format", "json"]) in (0, 1)
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert judged["baseline"]["commit"] == first


def test_a_results_file_is_not_compared_with_the_baseline_recorded_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfgate.sides import load_side

    repo, first = _repo_with_a_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    [record] = load_side(LEVEL1, benchmark="resnet").records
    slower = json.loads(json.dumps(record))
    slower["samples"]["step_time_us"] = [t * 1.5 for t in slower["samples"]["step_time_us"]]
    older = _write_results(tmp_path / "older.json", first, [{**slower, "verdict": "pass"}])
    assert main(["baseline", "update", "--from", str(older)]) == 0
    repo.git.add("older.json", "baselines")
    repo.index.commit("perfgate: baselines")
    (tmp_path / "model.py").write_text("v2\n")
    repo.index.add(["model.py"])
    pushed = repo.index.commit("model v2").hexsha
    # The push's run, then the push job records its baselines from the results file.
    results = _write_results(tmp_path / "results.json", pushed, [{**record, "verdict": "pass"}])
    assert main(["baseline", "update", "--from", str(results)]) == 0
    repo.git.add("baselines")
    repo.index.commit("perfgate: baselines of the push")
    capsys.readouterr()
    # Looked up from the measured commit, the first baseline is this run's own: the same
    # steps, +0.0%, a pass whatever the run measured. It is the one before that compares.
    assert main(["compare", str(results), "--format", "json"]) == 0
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert judged["baseline"]["commit"] == first
    step = next(m for m in judged["metrics"] if m["name"] == "step_time")
    assert step["change"] == pytest.approx(-1 / 3)
    assert (
        f"the baseline of {pushed[:12]} was recorded from this very run: it is not compared "
        "with itself, but with the baselines before it"
    ) in judged["notes"]
    # With no baseline before it, the run has none: not a pass against itself.
    assert main(["compare", str(older), "--format", "json"]) == 0
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert judged["verdict"] == "no-baseline"
    assert judged["notes"][0] == (
        f"the baseline of {first[:12]} was recorded from this very run: it is not compared "
        "with itself"
    )


def test_a_damaged_baseline_is_its_benchmarks_error_and_the_others_are_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfgate.sides import load_side

    repo, _ = _repo_with_a_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    for name in ("resnet", "bert"):
        assert main(["baseline", "update", "--from", str(LEVEL1), "--benchmark", name]) == 0
    repo.git.add("-A")
    head = repo.index.commit("perfgate: baselines").hexsha
    [damaged] = (tmp_path / "baselines" / "bert").rglob("*.json")
    damaged.write_text(damaged.read_text()[:200])
    [record] = load_side(LEVEL1, benchmark="resnet").records
    runs = [{**record, "benchmark": n, "verdict": "pass"} for n in ("bert", "resnet")]
    results = _write_results(tmp_path / "results.json", head, runs)
    capsys.readouterr()
    # It was one error line and no report at all: resnet went unjudged with bert.
    assert main(["compare", str(results), "--format", "json"]) == 2
    document = json.loads(capsys.readouterr().out)
    verdicts = {b["benchmark"]: b["verdict"] for b in document["benchmarks"]}
    assert verdicts["bert"] == "error" and verdicts["resnet"] != "error"
    [bert] = [b for b in document["benchmarks"] if b["benchmark"] == "bert"]
    # The reason ended mid-sentence: "… column 18: Unterminated string starting at".
    assert bert["notes"][0].startswith(
        f"the baseline store holds a file perfgate cannot use: {damaged.relative_to(tmp_path)}: "
        "not valid JSON at "
        "line 8, column 18: Unterminated string; restore it from git"
    ), bert["notes"]
    assert bert["baseline"]["path"] == str(damaged.relative_to(tmp_path))


def test_a_configured_baseline_branch_that_is_not_there_is_an_error_in_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _ = _repo_with_a_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["baseline", "update", "--from", str(LEVEL1), "--benchmark", "resnet"]) == 0
    (tmp_path / "perfgate.yaml").write_text("baseline: {branch: trunk}\n")
    repo.git.add("-A")
    repo.index.commit("baselines, and a branch name misspelt")
    capsys.readouterr()
    said = (
        f"perfgate: error: {tmp_path}: no branch 'trunk' (looked for trunk and origin/trunk; "
        "fetch it, or set baseline.branch in the configuration)\n"
    )
    # compare and show walked HEAD instead ("HEAD (no branch trunk or origin/trunk)", rc 0),
    # history called HEAD's first parents the main line; only prune said so.
    for command in (
        ["compare", str(LEVEL1), "--benchmark", "resnet"],
        ["history", "resnet"],
        ["baseline", "prune", "--keep", "1"],
    ):
        assert main(command) == 2, command
        assert capsys.readouterr().err == said, command


def test_history_of_a_metric_the_baselines_lack_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfgate.sides import load_side

    repo, head = _repo_with_a_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    [record] = load_side(LEVEL1, benchmark="resnet").records
    samples = {k: v for k, v in record["samples"].items() if k != "utilization"}
    run = {**record, "samples": samples, "verdict": "no-baseline"}
    results = _write_results(tmp_path / "results.json", head, [run])
    assert main(["baseline", "update", "--from", str(results)]) == 0
    repo.git.add("baselines")
    repo.index.commit("perfgate: baselines")
    capsys.readouterr()
    assert main(["history", "resnet", "--metric", "utilization"]) == 0
    # It said "no baselines on the main line", of a store holding one.
    assert capsys.readouterr().out.splitlines()[-1] == (
        "note: no baselines with utilization on the main line within the 2 commit(s) looked "
        "at (--max-depth 200): the 1 found there hold none (recorded without a profiler, or "
        "by one that does not measure it)"
    )


def test_baseline_recorded_on_main_gates_a_feature_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_dir = tmp_path / "repo"
    repo, first = _repo_with_a_model(repo_dir)
    profile = LEVEL1
    # Record on main, commit the baseline (as the Action does).
    assert (
        main(
            [
                "baseline",
                "update",
                "--from",
                str(profile),
                "--benchmark",
                "resnet",
                "--env",
                "ascend910b-x1",
                "--repo",
                str(repo_dir),
            ]
        )
        == 0
    )
    recorded = capsys.readouterr().out
    baseline_file = repo_dir / "baselines" / "resnet" / "ascend910b-x1" / f"{first}.json"
    assert recorded.strip() == f"recorded {baseline_file}"
    stored = json.loads(baseline_file.read_text())
    assert stored["format"] == "perfgate.baseline"
    assert stored["commit"] == first
    assert stored["samples"]["step_time_us"] == [pytest.approx(154483.509)]
    repo.index.add([str(baseline_file.relative_to(repo_dir))])
    repo.index.commit("perfgate: baseline")
    # A feature branch with a slower model.
    repo.git.checkout("-b", "feature")
    (repo_dir / "model.py").write_text("v2\n")
    repo.index.add(["model.py"])
    repo.index.commit("model v2")
    slowed = slow_down(profile, tmp_path / "slowed_ascend_pt", "MatMulV2", 2000.0)

    assert (
        main(
            [
                "compare",
                str(slowed),
                "--benchmark",
                "resnet",
                "--env",
                "ascend910b-x1",
                "--repo",
                str(repo_dir),
                "--format",
                "json",
            ]
        )
        == 1
    )
    doc = json.loads(capsys.readouterr().out)
    [bench] = doc["benchmarks"]
    assert bench["verdict"] == "regression"
    assert bench["baseline"]["commit"] == first
    assert bench["baseline"]["how"] == "merge-base of HEAD and main"
    assert bench["baseline"]["distance"] == 1  # merge-base has no baseline; its parent does

    assert (
        main(
            [
                "compare",
                str(profile),
                "--benchmark",
                "resnet",
                "--env",
                "ascend910b-x1",
                "--repo",
                str(repo_dir),
            ]
        )
        == 0
    )
    assert "verdict: PASS" in capsys.readouterr().out

    # Another runner environment has no baseline: not a regression, and it says how to fix.
    assert (
        main(
            [
                "compare",
                str(slowed),
                "--benchmark",
                "resnet",
                "--env",
                "cpu-x86_64",
                "--repo",
                str(repo_dir),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "[NO-BASELINE] resnet" in out
    assert "baselines of 'resnet' exist for other runner environments: ascend910b-x1" in out
    assert (
        main(
            [
                "compare",
                str(slowed),
                "--benchmark",
                "resnet",
                "--env",
                "cpu-x86_64",
                "--repo",
                str(repo_dir),
                "--strict",
            ]
        )
        == 1
    )
    capsys.readouterr()

    assert main(["baseline", "list", "--repo", str(repo_dir)]) == 0
    assert f"resnet       ascend910b-x1  {first[:12]}" in capsys.readouterr().out
    # On a narrow terminal the path column (the store's layout spelt out) goes, and the
    # layout is said once; the listing was ~150 columns whatever the terminal.
    for width, kept in ((400, ".json"), (80, "created"), (50, "commit")):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("COLUMNS", str(width))
            assert main(["baseline", "list", "--repo", str(repo_dir)]) == 0
        lines = capsys.readouterr().out.splitlines()
        table = [line for line in lines if not line.startswith("files: ")]
        assert max(map(len, table)) <= width and kept in "".join(table)
        assert any(first[:12] in line for line in table)
        said = [line for line in lines if line.startswith("files: ")]
        assert said == ([] if width == 400 else [f"files: {said[0][7:]}"])
        if said:
            assert said[0].endswith("/<benchmark>/<env>/<commit>.json")


def test_baseline_update_refuses_a_dirty_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _git_repo(tmp_path)
    (tmp_path / "model.py").write_text("v1\n")
    repo.index.add(["model.py"])
    repo.index.commit("v1")
    (tmp_path / "model.py").write_text("v2\n")
    assert main(["baseline", "update", "--from", str(LEVEL1), "--repo", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the working tree has uncommitted changes" in err
    assert "--allow-dirty" in err
    assert not (tmp_path / "baselines").exists()


def test_baseline_update_refuses_results_measured_on_a_dirty_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfgate.sides import load_side

    repo = _git_repo(tmp_path)
    (tmp_path / "model.py").write_text("v1\n")
    repo.index.add(["model.py"])
    sha = repo.index.commit("v1").hexsha
    [record] = load_side(LEVEL1, benchmark="resnet").records
    # Measured with model.py changed, then the change undone: the tree is clean now, and
    # the baseline was recorded as HEAD's, marked clean.
    run = {**record, "verdict": "no-baseline"}
    results = _write_results(tmp_path / "results.json", sha, [run], dirty=True)
    update = ["baseline", "update", "--from", str(results), "--repo", str(tmp_path)]
    assert main(update) == 2
    assert capsys.readouterr().err == (
        "perfgate: error: the results were measured on a working tree with uncommitted "
        f"changes (the file says dirty: true), so HEAD {sha[:12]} is not what was measured; "
        "measure the commit again, or pass --allow-dirty to record a baseline marked dirty\n"
    )
    assert not (tmp_path / "baselines").exists()
    assert main([*update, "--allow-dirty"]) == 0
    [written] = (tmp_path / "baselines" / "resnet").rglob("*.json")
    assert json.loads(written.read_text())["dirty"] is True
    capsys.readouterr()
    # Compared with, such a baseline says what it is (only `baseline show` said DIRTY): here
    # a run of the profile (the results file's own run is not compared with the baseline
    # recorded from it).
    repo.index.add(["baselines"])
    repo.index.commit("baselines")
    compare = ["compare", str(LEVEL1), "--benchmark", "resnet", "--repo", str(tmp_path)]
    compare += ["--format", "json"]
    main(compare)
    [judged] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert (
        f"the baseline of {sha[:12]} was recorded from a working tree with uncommitted changes "
        "(--allow-dirty): it may not be what that commit measures; record it again from a "
        "clean checkout"
    ) in judged["warnings"]


def test_a_gated_metric_one_side_cannot_measure_makes_the_run_incomparable_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = (
        DATA / "msprof" / "ascend-msprof-skill" / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
    )
    partial = shutil.copytree(prof, tmp_path / prof.name)
    for task_time in partial.rglob("task_time_*.csv"):  # an export without its task file
        task_time.unlink()
    assert main(["compare", str(prof), str(partial), "--format", "json"]) == 0
    [benchmark] = json.loads(capsys.readouterr().out)["benchmarks"]
    # It said pass: copy_ratio, gated, was n/a in the current run and judged by nobody.
    assert benchmark["verdict"] == "incomparable"
    assert (
        "incomparable: gated but measured on one side only: copy_ratio (not in the current), "
        "so it was not judged; profile both the same way (the export's task files, the "
        "profiler level) or record a baseline of this setup"
    ) in benchmark["notes"]
    assert main(["compare", str(prof), str(prof), "--format", "json"]) == 0
    [same] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert same["verdict"] != "incomparable"


def test_python_dash_m_perfgate_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "perfgate", "inspect", str(LEVEL1), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metrics"]["step_time_us"]["n"] == 1


def test_report_renders_a_results_file_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfgate.analysis.compare import compare_runs
    from perfgate.report.compare import comparison_dict
    from perfgate.rules import default_rules
    from perfgate.sides import load_side

    slowed = slow_down(LEVEL1, tmp_path / "slowed_ascend_pt", "MatMulV2", 2000.0)
    [baseline] = load_side(LEVEL1, benchmark="resnet").records
    [current] = load_side(slowed, benchmark="resnet").records
    comparison = compare_runs(baseline, current, default_rules())
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            {
                "format": "perfgate.results",
                "format_version": 1,
                "commit": None,
                "runs": [
                    {
                        **current,
                        "verdict": comparison.verdict,
                        "comparison": comparison_dict(comparison),
                    }
                ],
            }
        )
    )
    assert main(["report", str(results), "--format", "md"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("### perfgate: ❌ regression")
    assert "resnet: step_time regressed: 154.484 ms → 170.484 ms (+10.4%, limit +5%)" in out
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert "no such results file" in capsys.readouterr().err


def test_baseline_show_history_and_prune_follow_the_main_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _git_repo(tmp_path)
    shas = []
    for i in range(3):
        (tmp_path / "model.py").write_text(f"v{i}\n")
        repo.index.add(["model.py"])
        shas.append(repo.index.commit(f"model v{i}").hexsha)
        assert (
            main(
                [
                    "baseline",
                    "update",
                    "--from",
                    str(LEVEL1),
                    "--benchmark",
                    "resnet",
                    "--env",
                    "ascend910b-x1",
                    "--repo",
                    str(tmp_path),
                ]
            )
            == 0
        )
        repo.git.add("-A")
        repo.index.commit(f"perfgate: baselines for v{i}")
    capsys.readouterr()

    assert main(["baseline", "show", "resnet", "--repo", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert f"commit:   {shas[2]} (main)" in shown
    [step] = [line.split() for line in shown.splitlines() if line.startswith("step_time")]
    assert step[:4] == ["step_time", "154.484", "ms", "154.484"]  # gated, then the median

    assert main(["history", "resnet", "--repo", str(tmp_path)]) == 0
    history = capsys.readouterr().out
    assert "resnet on ascend910b-x1: 3 baseline(s)" in history
    rows = history.splitlines()[3:6]
    assert [line.split()[0] for line in rows] == [s[:12] for s in shas[::-1]]
    assert "note: 3 baseline(s): change points need 4 or more" in history
    # A misspelt env: one line naming the envs there are (it was an empty table, exit 0).
    assert main(["history", "resnet", "--env", "ascend910b-x8", "--repo", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith(
        "no baselines of benchmark 'resnet' on env 'ascend910b-x8' (its baselines are on: "
        "ascend910b-x1)\n"
    )

    assert main(["baseline", "prune", "--keep", "1", "--dry-run", "--repo", str(tmp_path)]) == 0
    assert "would remove 2 baseline(s)" in capsys.readouterr().out
    assert main(["baseline", "prune", "--keep", "1", "--repo", str(tmp_path)]) == 0
    capsys.readouterr()
    left = sorted(p.stem for p in (tmp_path / "baselines" / "resnet").glob("*/*.json"))
    assert left == [shas[2]]


def _update_baseline(repo: Path, benchmark: str) -> None:
    args = ["baseline", "update", "--from", str(LEVEL1), "--benchmark", benchmark]
    assert main([*args, "--env", "ascend910b-x1", "--repo", str(repo)]) == 0


def test_baseline_prune_unreachable_removes_the_baselines_of_gone_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A baseline recorded on a PR commit stays in the store after the PR is squash-merged and
    # its branch deleted; no lookup reaches it again. --unreachable finds it; --keep cannot.
    work = tmp_path / "repo"
    work.mkdir()
    repo = _git_repo(work)
    (work / "model.py").write_text("v0\n")
    repo.index.add(["model.py"])
    main_sha = repo.index.commit("model v0").hexsha
    _update_baseline(work, "resnet")
    repo.git.add("-A")
    repo.index.commit("perfgate: baselines for v0")
    trunk = repo.active_branch.name
    repo.git.checkout("-b", "feature")
    (work / "model.py").write_text("v1\n")
    repo.index.add(["model.py"])
    feature_sha = repo.index.commit("model v1").hexsha
    _update_baseline(work, "resnet")
    repo.git.checkout(trunk)  # the new baseline file is untracked: it stays in the tree
    repo.git.branch("-D", "feature")
    store = work / "baselines" / "resnet" / "ascend910b-x1"
    capsys.readouterr()

    assert main(["baseline", "prune", "--keep", "5", "--repo", str(work)]) == 0
    assert "removed 0 baseline(s)" in capsys.readouterr().out
    args = ["baseline", "prune", "--unreachable", "--repo", str(work)]
    assert main([*args, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"would remove {store / feature_sha}.json",
        "would remove 1 baseline(s): those of commits that no ref reaches",
    ]
    assert sorted(p.stem for p in store.glob("*.json")) == sorted([main_sha, feature_sha])
    assert main(args) == 0
    capsys.readouterr()
    assert [p.stem for p in store.glob("*.json")] == [main_sha]

    # Neither option: nothing to do is a usage error, not a silent no-op.
    assert main(["baseline", "prune", "--repo", str(work)]) == 2
    assert "say what goes: --keep N, --unreachable, or both" in capsys.readouterr().err

    # A shallow clone would take every commit before its boundary for gone: refused.
    (work / "model.py").write_text("v2\n")
    repo.index.add(["model.py"])
    repo.index.commit("model v2")
    shallow = tmp_path / "shallow"
    git.Repo.clone_from(f"file://{work}", shallow, depth=1)
    assert main(["baseline", "prune", "--unreachable", "--repo", str(shallow)]) == 2
    err = capsys.readouterr().err
    assert "a shallow clone does not know which commits are gone" in err
    assert "git fetch --unshallow" in err
    assert [p.stem for p in (shallow / store.relative_to(work)).glob("*.json")] == [main_sha]


def test_an_msprof_export_with_empty_task_tables_says_what_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # op_summary and task_time hold their headers only; step_trace and op_statistic remain.
    # The steps' time is known; whether the device worked is not: no "idle", no 0% utilization.
    msprof_data = Path(__file__).parent / "data" / "msprof"
    prof = tmp_path / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
    shutil.copytree(msprof_data / "ascend-msprof-skill" / prof.name, prof)
    output = prof / "mindstudio_profiler_output"
    shutil.copy(msprof_data / "synthetic" / "step_trace_20260605161737.csv", output)
    for pattern in ("op_summary_*.csv", "task_time_*.csv"):
        for table in output.glob(pattern):
            table.write_text(table.read_text(encoding="utf-8").splitlines()[0] + "\n")
    assert main(["inspect", str(prof), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["step_time_us"]["median"] == 93000.0
    assert doc["metrics"]["utilization"]["n"] == 0
    assert {row["breakdown_from"] for row in doc["per_step"]} == {"none"}
    assert all(row["free_us"] is None for row in doc["per_step"])
    assert not any(hint["rule"] in ("idle_gaps", "low_utilization") for hint in doc["advice"])
    assert any("no device tasks for rank(s) 0" in note for note in doc["notes"])


HOST_COPY = Path(__file__).parent / "data" / "records" / "host_copy.results.json"


@pytest.mark.parametrize("form", ["table", "md", "json", "html"])
def test_report_exits_alike_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    # A real regression whose runs lack the optional "verdict": the HTML page exited 0.
    document = json.loads(HOST_COPY.read_text(encoding="utf-8"))
    for run in document["runs"]:
        del run["verdict"]
    no_verdicts = tmp_path / "no-verdicts.json"
    no_verdicts.write_text(json.dumps(document))
    out = tmp_path / f"report.{form}"
    assert main(["report", str(no_verdicts), "--format", form, "-o", str(out)]) == 1
    # No runs at all: an error (the HTML page exited 0 with an empty page).
    document["runs"] = []
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["report", str(empty), "--format", form, "-o", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"perfgate: error: {empty}: holds no ")


def test_baseline_list_shows_the_store_past_a_damaged_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_dir = tmp_path / "repo"
    _, sha = _repo_with_a_model(repo_dir)
    for benchmark in ("bert", "resnet"):
        update = ["baseline", "update", "--from", str(LEVEL1), "--benchmark", benchmark]
        assert main([*update, "--env", "npu", "--repo", str(repo_dir)]) == 0
    damaged = repo_dir / "baselines" / "bert" / "npu" / f"{sha}.json"
    damaged.write_text(damaged.read_text()[:100])
    capsys.readouterr()
    # It stopped at the damaged file, so the listing could not show the rest of the store.
    assert main(["baseline", "list", "--repo", str(repo_dir)]) == 2
    out, err = capsys.readouterr()
    assert f"bert         npu    {sha[:12]}  DAMAGED" in out
    assert f"resnet       npu    {sha[:12]}  20" in out
    assert err.startswith(f"perfgate: error: {damaged}: ")
    assert len(err.splitlines()) == 1


def test_compare_picks_one_benchmark_of_a_results_file_and_names_a_misspelt_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A baseline file of input_pipeline against a results file of three benchmarks (the
    # README's host_copy regression): without --benchmark, cnn_train has no baseline there.
    records = DATA / "records"
    sides = [str(records / "input_pipeline.baseline.json"), str(records / "host_copy.results.json")]
    assert main(["compare", *sides]) == 2
    err = capsys.readouterr().err
    assert "holds no run of benchmark 'cnn_train' (it has: input_pipeline)" in err
    assert "--benchmark NAME compares one benchmark of a results file" in err

    config = tmp_path / "perfgate.yaml"
    config.write_text(
        "benchmarks:\n  input_pipline: {thresholds: {copy_ratio: {max_increase: 50pt}}}\n"
    )
    assert main(["compare", *sides, "--benchmark", "input_pipeline", "--config", str(config)]) == 1
    out, err = capsys.readouterr()
    assert "[REGRESSION] input_pipeline" in out
    assert "copy_ratio   1.55%       41.13%     +39.58pt  +2pt" in out  # the default limit
    assert err == (
        f"perfgate: warning: {config}: benchmarks.input_pipline names no benchmark of this run; "
        "did you mean input_pipeline? (that one has the default rules)\n"
    )

    assert main(["compare", *sides, "--benchmark", "nope"]) == 2
    assert (
        "no run of benchmark 'nope' (its runs: cnn_train, input_pipeline, transformer_infer)"
        in (capsys.readouterr().err)
    )

    # --env picks runs of a results file too, and a baseline file must be of it: it was
    # silently ignored, and `baseline update --env gpu-a100` recorded under cpu-x86_64.
    chosen = ["--benchmark", "input_pipeline", "--env"]
    assert main(["compare", *sides, *chosen, "cpu-x86_64"]) == 1
    assert "[REGRESSION] input_pipeline" in capsys.readouterr().out
    assert main(["compare", *sides, *chosen, "gpu-a100"]) == 2
    assert capsys.readouterr().err == (
        f"perfgate: error: {sides[1]}: no run of env 'gpu-a100' (its runs are of env: cpu-x86_64)\n"
    )
    assert main(["compare", sides[0], sides[0], "--env", "gpu-a100"]) == 2
    assert capsys.readouterr().err == (
        f"perfgate: error: {sides[0]}: no run of env 'gpu-a100' (its runs are of env: cpu-x86_64)\n"
    )
    update = ["baseline", "update", "--from", sides[1], "--env", "gpu-a100", "--repo"]
    assert main([*update, str(tmp_path)]) == 2
    assert "no run of env 'gpu-a100'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", ""],
        ["compare", ""],
        ["compare", "a.json", "--repo="],
        ["compare", "a.json", "-o", ""],
        ["baseline", "update", "--from="],
        ["report", ""],
        ["ab", "--base="],
    ],
)
def test_an_empty_path_or_ref_is_a_usage_error_not_the_current_directory(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # An unset shell variable (`perfgate inspect "$PROFILE"`) read `.`, or wrote the report
    # to `.` ("cannot write the report: Device or resource busy").
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert ": is empty (expected " in err and "Traceback" not in err


def test_a_report_written_over_the_file_it_reads_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `report r.json --format md -o r.json` replaced the results file (what `baseline update
    # --from` reads) with Markdown; `compare r.json -o r.json` too.
    results = tmp_path / "r.json"
    shutil.copy(DATA / "records" / "host_copy.results.json", results)
    written = results.read_bytes()
    for argv in (
        ["report", str(results), "--format", "md", "-o", str(results)],
        ["compare", str(results), "-o", str(tmp_path / "." / "r.json")],
        ["report", str(results), "--format", "html", "-o", str(results)],
    ):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == (
            f"perfgate: error: -o {argv[-1]} is the file this command reads ({results}); "
            "write the report to another file\n"
        )
        assert results.read_bytes() == written
    assert main(["report", str(results), "--format", "md", "-o", str(tmp_path / "r.md")]) == 1
    assert (tmp_path / "r.md").read_text().startswith("### perfgate")


def test_a_report_written_over_the_settings_or_into_the_store_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `compare … -o perfgate.yaml` replaced the settings it had just read, `-o` into the
    # baseline store a baseline it compared with, `ab -o` the results.json of its --out.
    _repo_with_a_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perfgate.yaml").write_text("baseline: {dir: perf}\n")
    record = DATA / "records" / "input_pipeline.baseline.json"
    for output, said in (
        ("perfgate.yaml", "is the file this command reads (perfgate.yaml)"),
        ("perf/b/e/x.json", "is inside the baseline store perf"),
    ):
        assert main(["compare", str(record), str(record), "-o", output]) == 2
        assert capsys.readouterr().err == (
            f"perfgate: error: -o {output} {said}; write the report "
            + ("to another file\n" if "reads" in said else "elsewhere\n")
        )
    assert (tmp_path / "perfgate.yaml").read_text() == "baseline: {dir: perf}\n"
    argv = ["ab", "--base", "HEAD", "--out", "ab-out", "-o", "ab-out/results.json", "--", "x"]
    assert main(argv) == 2
    assert "is inside the A/B run's output folder (--out) ab-out" in capsys.readouterr().err


def test_a_run_whose_verdict_differs_from_its_comparison_is_refused_by_every_door(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An edited results file: the HTML page (the run's verdict) said pass, exit 0; the
    # tables (the comparison's) said regression, exit 1.
    document = json.loads((DATA / "records" / "host_copy.results.json").read_text())
    document["runs"][0]["verdict"] = "pass"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document))
    says = (
        f"perfgate: error: {edited}: runs[0]: verdict 'pass' differs from its comparison's "
        "'regression' (expected a results file as perfgate wrote it)\n"
    )
    for argv in (
        ["report", str(edited), "--format", "html", "-o", str(tmp_path / "r.html")],
        ["report", str(edited), "--format", "md"],
        ["compare", str(edited)],
        ["baseline", "update", "--from", str(edited), "--repo", str(tmp_path)],
    ):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == says, argv
    assert not (tmp_path / "r.html").exists()


def test_report_of_an_update_run_shows_what_it_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A --perfgate-update run's results file was a data error in table, md and json (exit 2)
    # and a page in html (exit 0): one file perfgate wrote, three answers.
    document = json.loads(HOST_COPY.read_text(encoding="utf-8"))
    for run in document["runs"]:
        run.pop("comparison"), run.pop("judged_by", None)
        run["verdict"] = "recorded"
        run["baseline_path"] = f"baselines/{run['benchmark']}/{run['env']}/{'a' * 40}.json"
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps(document))
    names = [run["benchmark"] for run in document["runs"]]
    assert main(["report", str(recorded)]) == 0
    table = capsys.readouterr().out
    rows = [line.split() for line in table.splitlines() if line.split()[:1] in ([n] for n in names)]
    assert [row[:2] for row in rows] == [[name, "recorded"] for name in names]
    assert main(["report", str(recorded), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("### perfgate: baselines recorded\n")
    assert f"`baselines/{names[0]}/" in markdown
    assert main(["report", str(recorded), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    assert main(["report", str(recorded), "--format", "json"]) == 2
    assert "--format table, md or html show what it recorded" in capsys.readouterr().err
