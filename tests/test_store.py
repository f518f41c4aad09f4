"""Baseline storage and the git history that picks baselines (README "Baselines").

The git tests run against a small repository built here with fixed dates, so every expected
sha is a commit of that repository:

    A - B - C - - - D - M      main (M merges topic; first parent D)
         \\   \\       /
          \\   X - Y            topic, merged into main by M
           E - F               feature, not merged

Dates rise A < B < E < F < C < X < Y < D < M: a walk in date order would go M D Y X C, so the
expected first-parent lists also prove the side branch is never entered.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import pytest
from conftest import GitRepo

from perfgate.errors import PerfgateError
from perfgate.store import (
    BASELINE_FORMAT_VERSION,
    BaselineEntry,
    Candidate,
    CommitInfo,
    FoundBaseline,
    baseline_candidates,
    current_commit,
    find_baseline,
    history,
    list_baselines,
    main_line,
    prune,
    read_baseline,
    resolve,
    validate_record,
    write_baseline,
)
from perfgate.store.atomic import atomic_write

# ---------------------------------------------------------------------------------------------
# A git repository with known commits

# A fixed, nonzero offset: the commit time must come back with it, unconverted.
DATES = {
    "A": "2024-01-01T12:00:00+02:00",
    "B": "2024-01-02T12:00:00+02:00",
    "E": "2024-01-03T12:00:00+02:00",
    "F": "2024-01-04T12:00:00+02:00",
    "C": "2024-01-05T12:00:00+02:00",
    "X": "2024-01-06T12:00:00+02:00",
    "Y": "2024-01-07T12:00:00+02:00",
    "D": "2024-01-08T12:00:00+02:00",
    "M": "2024-01-09T12:00:00+02:00",
}


def git_env(when: str = DATES["A"]) -> dict[str, str]:
    """Identity, dates and an empty config, so the shas do not depend on the machine."""
    return {
        "GIT_AUTHOR_NAME": "Perf Gate",
        "GIT_AUTHOR_EMAIL": "perfgate@example.com",
        "GIT_COMMITTER_NAME": "Perf Gate",
        "GIT_COMMITTER_EMAIL": "perfgate@example.com",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def commit(repo: Any, label: str) -> str:
    """Commit a file named after ``label`` at that label's date; return the sha."""
    (Path(repo.working_tree_dir) / f"{label}.txt").write_text(f"{label}\n")
    repo.git.add(f"{label}.txt", env=git_env())
    repo.git.commit("-m", label, env=git_env(DATES[label]))
    return str(repo.head.commit.hexsha)


@dataclass(frozen=True)
class History:
    path: Path
    sha: dict[str, str]

    @property
    def git(self) -> Any:
        """Runs git commands in the repository (``hist.git.tag("v1")``)."""
        return git.Git(self.path)

    def checkout(self, ref: str) -> None:
        self.git.checkout(ref, env=git_env())


def build_history(path: Path) -> dict[str, str]:
    repo = GitRepo(path).repo
    sha = {}
    for label in "AB":
        sha[label] = commit(repo, label)
    repo.git.checkout("-b", "feature", env=git_env())
    for label in "EF":
        sha[label] = commit(repo, label)
    repo.git.checkout("main", env=git_env())
    sha["C"] = commit(repo, "C")
    repo.git.checkout("-b", "topic", env=git_env())
    for label in "XY":
        sha[label] = commit(repo, label)
    repo.git.checkout("main", env=git_env())
    sha["D"] = commit(repo, "D")
    repo.git.merge("--no-ff", "-m", "M", "topic", env=git_env(DATES["M"]))
    sha["M"] = str(repo.head.commit.hexsha)
    repo.close()
    return sha


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("template") / "repo"
    return path, build_history(path)


@pytest.fixture
def hist(template: tuple[Path, dict[str, str]], tmp_path: Path) -> History:
    """A private copy of the template repository, HEAD on main at M."""
    src, sha = template
    path = tmp_path / "repo"
    shutil.copytree(src, path)
    return History(path, sha)


def clone(src: Path, dst: Path, *args: str) -> Any:
    """``git clone [args] file://src dst``; returns a runner of git commands in the clone."""
    git.Git(src).clone(*args, f"file://{src}", str(dst), env=git_env())
    return git.Git(dst)


def shas(candidates: list[Candidate], sha: dict[str, str]) -> list[tuple[str, int]]:
    """Candidates as (label, distance), for readable failures."""
    label = {v: k for k, v in sha.items()}
    return [(label.get(c.sha, c.sha), c.distance) for c in candidates]


MAIN_LINE = ["M", "D", "C", "B", "A"]


# ---------------------------------------------------------------------------------------------
# Lookup candidates


def test_a_feature_branch_starts_at_its_merge_base_then_walks_first_parents(
    hist: History,
) -> None:
    hist.checkout("feature")
    how = "merge-base of HEAD and main"
    assert baseline_candidates(hist.path) == [
        Candidate(hist.sha["B"], 0, how),
        Candidate(hist.sha["A"], 1, how),
    ]


def test_on_main_the_walk_starts_at_head_itself(hist: History) -> None:
    candidates = baseline_candidates(hist.path)
    assert shas(candidates, hist.sha) == [(label, i) for i, label in enumerate(MAIN_LINE)]
    assert {c.how for c in candidates} == {"first parents of HEAD on main"}


def test_the_first_parent_walk_never_enters_a_merged_side_branch(hist: History) -> None:
    walked = [c.sha for c in baseline_candidates(hist.path)]
    assert walked == [hist.sha[label] for label in MAIN_LINE]
    assert main_line(hist.path) == walked


def test_exclude_head_starts_a_push_to_main_at_its_first_parent(hist: History) -> None:
    candidates = baseline_candidates(hist.path, exclude_head=True)
    assert shas(candidates, hist.sha) == [("D", 1), ("C", 2), ("B", 3), ("A", 4)]
    # max_depth counts the commits returned, not the one left out.
    short = baseline_candidates(hist.path, exclude_head=True, max_depth=2)
    assert shas(short, hist.sha) == [("D", 1), ("C", 2)]


def test_exclude_head_leaves_a_feature_walk_alone(hist: History) -> None:
    hist.checkout("feature")
    candidates = baseline_candidates(hist.path, exclude_head=True)
    assert shas(candidates, hist.sha) == [("B", 0), ("A", 1)]


def test_a_missing_baseline_branch_falls_back_to_head(hist: History) -> None:
    hist.git.branch("-m", "main", "trunk")
    hist.checkout("feature")
    candidates = baseline_candidates(hist.path)
    assert shas(candidates, hist.sha) == [("F", 0), ("E", 1), ("B", 2), ("A", 3)]
    assert {c.how for c in candidates} == {"HEAD (no branch main or origin/main)"}
    # The branch is configurable.
    trunk = baseline_candidates(hist.path, baseline_branch="trunk")
    assert trunk[0] == Candidate(hist.sha["B"], 0, "merge-base of HEAD and trunk")


def test_the_remote_branch_serves_when_there_is_no_local_one(hist: History, tmp_path: Path) -> None:
    ci = clone(hist.path, tmp_path / "ci")
    ci.checkout("-b", "feature", "origin/feature", env=git_env())
    ci.branch("-D", "main")
    how = "merge-base of HEAD and origin/main"
    assert baseline_candidates(tmp_path / "ci") == [
        Candidate(hist.sha["B"], 0, how),
        Candidate(hist.sha["A"], 1, how),
    ]
    assert main_line(tmp_path / "ci") == [hist.sha[label] for label in MAIN_LINE]


def test_baseline_ref_starts_the_walk_at_that_ref(hist: History) -> None:
    hist.git.tag("v1", hist.sha["C"])
    hist.checkout("feature")
    how = "--baseline-ref v1"
    assert baseline_candidates(hist.path, start_ref="v1") == [
        Candidate(hist.sha["C"], 0, how),
        Candidate(hist.sha["B"], 1, how),
        Candidate(hist.sha["A"], 2, how),
    ]


def test_max_depth_cuts_the_walk(hist: History) -> None:
    assert shas(baseline_candidates(hist.path, max_depth=2), hist.sha) == [("M", 0), ("D", 1)]
    with pytest.raises(PerfgateError) as err:
        baseline_candidates(hist.path, max_depth=0)
    assert str(err.value) == "baseline max_depth must be at least 1, got 0"


def test_a_shallow_clone_ends_the_walk_quietly(hist: History, tmp_path: Path) -> None:
    clone(hist.path, tmp_path / "shallow", "--depth", "2")
    candidates = baseline_candidates(tmp_path / "shallow")
    assert shas(candidates, hist.sha) == [("M", 0), ("D", 1)]


def test_a_shallow_pr_clone_without_the_merge_base_starts_at_head(
    hist: History, tmp_path: Path
) -> None:
    ci = clone(hist.path, tmp_path / "shallow", "--depth", "1", "--no-single-branch")
    ci.checkout("-b", "feature", "origin/feature", env=git_env())
    assert baseline_candidates(tmp_path / "shallow") == [
        Candidate(hist.sha["F"], 0, "HEAD (no merge-base with main in this shallow clone)")
    ]


# ---------------------------------------------------------------------------------------------
# The current commit and refs


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_repository_git_refuses_to_read_is_not_one_without_commits(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "checkout")
    repo.write("model.py", "x = 1\n")
    repo.commit("model")
    if repo.repo.git.config("--get-all", "safe.directory", with_exceptions=False):
        pytest.skip("git is told to trust other users' repositories (safe.directory)")
    for path in [repo.path, *repo.path.rglob("*")]:
        os.chown(path, 1234, 1234, follow_symlinks=False)  # a checkout of another user
    with pytest.raises(PerfgateError) as caught:
        current_commit(repo.path)
    # It said "the git repository has no commits yet (commit first …)".
    assert str(caught.value).startswith(
        f"{repo.path}: git cannot read the repository: fatal: detected dubious ownership in "
        f"repository at '{repo.path}'"
    )
    assert f"git config --global --add safe.directory {repo.path}" in str(caught.value)


def test_an_orphan_branch_is_not_a_repository_without_commits(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "checkout")
    repo.write("model.py", "x = 1\n")
    repo.commit("model")
    repo.repo.git.checkout("--orphan", "docs")
    with pytest.raises(PerfgateError) as caught:
        current_commit(repo.path)
    # It said "the git repository has no commits yet", of a repository that has some.
    assert str(caught.value) == (
        f"{repo.path}: HEAD is on branch 'docs', which has no commits yet (commit first: "
        "baselines are keyed by commit)"
    )


def test_current_commit_reports_sha_branch_and_commit_time(hist: History) -> None:
    assert current_commit(hist.path) == CommitInfo(
        sha=hist.sha["M"], branch="main", dirty=False, time="2024-01-09T12:00:00+02:00"
    )


def test_a_subdirectory_of_the_checkout_finds_the_repository(hist: History) -> None:
    (hist.path / "sub").mkdir()
    assert current_commit(hist.path / "sub").sha == hist.sha["M"]


def test_a_detached_head_has_no_branch(hist: History) -> None:
    hist.checkout(hist.sha["C"])
    assert current_commit(hist.path) == CommitInfo(
        sha=hist.sha["C"], branch=None, dirty=False, time="2024-01-05T12:00:00+02:00"
    )


def test_changed_tracked_files_make_the_tree_dirty_but_untracked_ones_do_not(
    hist: History,
) -> None:
    (hist.path / "profile.json").write_text("{}\n")
    assert current_commit(hist.path).dirty is False
    (hist.path / "A.txt").write_text("changed\n")
    assert current_commit(hist.path).dirty is True
    hist.git.add("A.txt")
    assert current_commit(hist.path).dirty is True


def test_changes_in_the_baseline_store_leave_the_tree_clean(hist: History) -> None:
    store = hist.path / "perf store"  # a space and no glob: taken literally
    (store / "bench").mkdir(parents=True)
    (store / "bench" / "b.json").write_text("{}\n")
    hist.git.add("perf store")
    hist.git.commit("-m", "store", env=git_env())
    (store / "bench" / "b.json").write_text('{"changed": 1}\n')
    assert current_commit(hist.path).dirty is True
    assert current_commit(hist.path, store=store).dirty is False
    # Asked from a subdirectory, the store is still found relative to the top of the tree.
    (hist.path / "sub").mkdir()
    assert current_commit(hist.path / "sub", store=store).dirty is False
    (hist.path / "A.txt").write_text("changed\n")
    assert current_commit(hist.path, store=store).dirty is True


def test_a_change_staged_then_undone_leaves_what_is_measured_clean(hist: History) -> None:
    original = (hist.path / "A.txt").read_bytes()
    (hist.path / "A.txt").write_text("changed\n")
    hist.git.add("A.txt")
    (hist.path / "A.txt").write_bytes(original)  # the index differs from HEAD, the files not
    assert current_commit(hist.path).dirty is False


def test_outside_a_repository_the_error_says_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(PerfgateError) as err:
        current_commit(plain)
    assert str(err.value) == (
        f"{plain}: not inside a git repository "
        "(run perfgate from a git checkout, or `git init` and commit first)"
    )


def test_a_repository_without_commits_is_an_error(tmp_path: Path) -> None:
    git.Repo.init(tmp_path / "empty").close()
    with pytest.raises(PerfgateError) as err:
        baseline_candidates(tmp_path / "empty")
    assert str(err.value) == (
        f"{tmp_path / 'empty'}: the git repository has no commits yet "
        "(commit first: baselines are keyed by commit)"
    )


def test_resolve_gives_full_shas(hist: History) -> None:
    hist.git.tag("-a", "v1", "-m", "release", hist.sha["C"], env=git_env())
    assert resolve(hist.path, "v1") == hist.sha["C"]
    assert resolve(hist.path, "HEAD~1") == hist.sha["D"]
    assert resolve(hist.path, "feature") == hist.sha["F"]
    assert resolve(hist.path, hist.sha["E"][:10]) == hist.sha["E"]


@pytest.mark.parametrize("ref", ["nope", "HEAD~9", "--all", ""])
def test_resolve_names_an_unknown_ref(hist: History, ref: str) -> None:
    with pytest.raises(PerfgateError) as err:
        resolve(hist.path, ref)
    assert str(err.value) == (
        f"{hist.path}: unknown git ref {ref!r} (expected a branch, tag or commit of this "
        "repository; in a shallow CI clone, fetch it first)"
    )


def test_main_line_needs_the_branch(hist: History) -> None:
    with pytest.raises(PerfgateError) as err:
        main_line(hist.path, "release")
    assert str(err.value) == (
        f"{hist.path}: no branch 'release' (looked for release and origin/release; fetch it, "
        "or set baseline.branch in the configuration)"
    )


# ---------------------------------------------------------------------------------------------
# Baseline files

SHA1 = "1" * 40
SHA2 = "2" * 40


def record(
    benchmark: str = "resnet", env: str = "cpu-x86_64", sha: str = SHA1, **rest: Any
) -> dict[str, Any]:
    return {
        "format": "perfgate.baseline",
        "format_version": 1,
        "benchmark": benchmark,
        "env": env,
        "commit": sha,
        "samples": {"step_time_us": [1.5, 2.0]},
        **rest,
    }


def test_a_record_is_written_with_its_header_keys_first_and_reads_back(tmp_path: Path) -> None:
    # The caller's order for its own keys is kept; the header keys move to the front.
    given = {
        "samples": {"step_time_us": [1.5, 2.0]},
        "commit": SHA1,
        "created": "2024-01-09T10:00:00+00:00",
        "env": "cpu-x86_64",
        "format_version": 1,
        "benchmark": "resnet",
        "format": "perfgate.baseline",
        "note": "µs",
    }
    path = write_baseline(tmp_path, given)
    assert path == tmp_path / "resnet" / "cpu-x86_64" / f"{SHA1}.json"
    assert path.read_text(encoding="utf-8") == (
        "{\n"
        '  "format": "perfgate.baseline",\n'
        '  "format_version": 1,\n'
        '  "benchmark": "resnet",\n'
        '  "env": "cpu-x86_64",\n'
        f'  "commit": "{SHA1}",\n'
        '  "samples": {\n'
        '    "step_time_us": [\n'
        "      1.5,\n"
        "      2.0\n"
        "    ]\n"
        "  },\n"
        '  "created": "2024-01-09T10:00:00+00:00",\n'
        '  "note": "µs"\n'
        "}\n"
    )
    assert read_baseline(path) == given
    assert path.stat().st_mode & 0o777 == 0o644


def test_writing_again_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    write_baseline(tmp_path, record(samples={"step_time_us": [1]}))
    path = write_baseline(tmp_path, record(samples={"step_time_us": [2]}))
    assert read_baseline(path)["samples"] == {"step_time_us": [2]}
    assert os.listdir(path.parent) == [f"{SHA1}.json"]


def test_a_value_json_cannot_hold_leaves_the_old_file_untouched(tmp_path: Path) -> None:
    path = write_baseline(tmp_path, record(samples={"step_time_us": [1.0]}))
    before = path.read_bytes()
    with pytest.raises(PerfgateError) as err:
        write_baseline(tmp_path, record(samples={"step_time_us": [float("nan")]}))
    assert str(err.value) == (
        "baseline record: key 'samples.step_time_us.0' is nan (expected a finite number)"
    )
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [f"{SHA1}.json"]


# Concurrent writers: 8 processes × 20 writes of ~100 KB records, alternating one shared
# commit (same file for all) with a commit of their own.
WRITERS, WRITES = 8, 20
SHARED = "a" * 40


def own_sha(writer: int) -> str:
    return f"{writer:040x}"


def concurrent_record(sha: str, writer: int, write: int) -> dict[str, Any]:
    samples = [1 + writer * 1000 + write + k / 8 for k in range(5000)]  # a step takes time
    return record(sha=sha, writer=writer, write=write, samples={"step_time_us": samples})


def write_many(root: str, writer: int) -> None:
    for write in range(WRITES):
        sha = SHARED if write % 2 == 0 else own_sha(writer)
        write_baseline(Path(root), concurrent_record(sha, writer, write))


def test_concurrent_writers_never_leave_a_half_written_file(tmp_path: Path) -> None:
    # fork is quick; spawn (Windows) re-imports this module in every child, which also works.
    fork = "fork" in multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork") if fork else multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=write_many, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    shared = tmp_path / "resnet" / "cpu-x86_64" / f"{SHARED}.json"
    reads = 0
    # Read while they write: every read must see one writer's whole record.
    while any(p.is_alive() for p in procs):
        if shared.exists():
            got: dict[str, Any] = dict(read_baseline(shared))
            assert got == concurrent_record(SHARED, got["writer"], got["write"])
            reads += 1
        time.sleep(0.001)
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert reads > 0
    got = dict(read_baseline(shared))
    assert got == concurrent_record(SHARED, got["writer"], got["write"])
    for w in range(WRITERS):
        own = tmp_path / "resnet" / "cpu-x86_64" / f"{own_sha(w)}.json"
        assert read_baseline(own) == concurrent_record(own_sha(w), w, WRITES - 1)
    assert sorted(os.listdir(shared.parent)) == sorted(
        [f"{SHARED}.json"] + [f"{own_sha(w)}.json" for w in range(WRITERS)]
    )


@pytest.mark.parametrize("bad", ["a/b", ".", "..", "", "two words", "résumé", "a\\b"])
def test_unsafe_names_are_rejected(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PerfgateError) as err:
        find_baseline(tmp_path, bad, "cpu", [])
    assert str(err.value) == (
        f"benchmark name {bad!r} cannot be used in a baseline path "
        "(expected 1 to 128 letters, digits, '.', '_' or '-', not starting with '.')"
    )
    with pytest.raises(PerfgateError) as err:
        find_baseline(tmp_path, "resnet", bad, [])
    assert str(err.value).startswith(f"env name {bad!r} cannot be used")
    with pytest.raises(PerfgateError) as err:
        write_baseline(tmp_path, record(env=bad))
    assert str(err.value) == (
        f"baseline record: key 'env' is {bad!r} "
        "(expected a name of letters, digits, '.', '_' or '-', not starting with '.')"
    )
    assert list(tmp_path.iterdir()) == []


def test_bad_json_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{\n  "format": "perfgate.baseline",\n', encoding="utf-8")
    with pytest.raises(PerfgateError) as err:
        read_baseline(path)
    assert str(err.value) == (
        f"{path}: not valid JSON at line 3, column 1: Expecting property name enclosed in "
        "double quotes"
    )


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PerfgateError) as err:
        read_baseline(tmp_path / "gone.json")
    assert str(err.value) == f"{tmp_path / 'gone.json'}: no such baseline file"


def test_a_newer_format_version_asks_to_upgrade_perfgate(tmp_path: Path) -> None:
    path = tmp_path / "new.json"
    path.write_text(json.dumps(record(format_version=BASELINE_FORMAT_VERSION + 1)))
    with pytest.raises(PerfgateError) as err:
        read_baseline(path)
    assert str(err.value) == (
        f"{path}: baseline format_version {BASELINE_FORMAT_VERSION + 1} is newer than this "
        f"perfgate reads (up to {BASELINE_FORMAT_VERSION}); "
        "upgrade perfgate"
    )


def test_a_key_given_twice_is_refused_not_read_as_its_last_copy(tmp_path: Path) -> None:
    # A hand (or union) merge of two baselines into one file: json kept the second
    # "samples" and the gate compared with half of a file without a word.
    text = json.dumps(record())
    path = tmp_path / "merged.json"
    path.write_text(text[:-1] + ', "samples": {"step": [0], "step_time_us": [1.0]}}')
    with pytest.raises(PerfgateError) as err:
        read_baseline(path)
    assert str(err.value) == (
        f"{path}: key 'samples' is given twice in one object (expected each key once, as "
        "perfgate writes a baseline file)"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"format": "pytest-benchmark"},
            "key 'format' is 'pytest-benchmark', not a perfgate "
            "baseline (expected 'perfgate.baseline')",
        ),
        (
            {"format": None},
            "key 'format' is None, not a perfgate baseline (expected 'perfgate.baseline')",
        ),
        ({"format_version": "1"}, "key 'format_version' is '1' (expected a positive integer)"),
        ({"format_version": True}, "key 'format_version' is True (expected a positive integer)"),
        ({"format_version": 0}, "key 'format_version' is 0 (expected a positive integer)"),
        (
            {"benchmark": 3},
            "key 'benchmark' is 3 (expected a valid string)",
        ),
        ({"commit": SHA1[:7]}, "key 'commit' is '1111111' (expected a full lowercase commit sha)"),
        (
            {"commit": SHA1.upper().replace("1", "A")},
            f"key 'commit' is {'A' * 40!r} (expected a full lowercase commit sha)",
        ),
        ({"created": 17}, "key 'created' is 17 (expected a valid string)"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_a_foreign_record_names_the_source_and_the_key(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(PerfgateError) as err:
        validate_record({**record(), **change}, "x.json")
    assert str(err.value) == f"x.json: {message}"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("format", ", not a perfgate baseline (expected 'perfgate.baseline')"),
        ("format_version", " (expected a positive integer)"),
        ("env", ""),
        ("commit", " (expected a full lowercase commit sha)"),
        ("samples", ""),
    ],
)
def test_a_missing_key_is_named(key: str, expected: str) -> None:
    incomplete = record()
    del incomplete[key]
    with pytest.raises(PerfgateError) as err:
        validate_record(incomplete, "x.json")
    assert str(err.value) == f"x.json: key {key!r} is missing{expected}"


def test_a_record_must_be_an_object() -> None:
    with pytest.raises(PerfgateError) as err:
        validate_record([1], "x.json")
    assert str(err.value) == "x.json: expected a JSON object (a perfgate baseline), got list"


def test_a_baseline_in_the_wrong_place_is_an_error(tmp_path: Path) -> None:
    written = write_baseline(tmp_path, record(sha=SHA1))
    moved = written.with_name(f"{SHA2}.json")
    written.rename(moved)
    with pytest.raises(PerfgateError) as err:
        find_baseline(tmp_path, "resnet", "cpu-x86_64", [Candidate(SHA2, 0, "test")])
    assert str(err.value) == (
        f"{moved}: key 'commit' is {SHA1!r} but the file's place says {SHA2!r}"
    )


def test_lookup_picks_the_nearest_candidate_that_has_a_baseline(
    hist: History, tmp_path: Path
) -> None:
    root = tmp_path / "baselines"
    at_a = record(sha=hist.sha["A"], samples={"step_time_us": [1.0]})
    write_baseline(root, at_a)
    write_baseline(root, record(env="other", sha=hist.sha["B"]))
    hist.checkout("feature")
    candidates = baseline_candidates(hist.path)
    assert find_baseline(root, "resnet", "cpu-x86_64", candidates) == FoundBaseline(
        path=root / "resnet" / "cpu-x86_64" / f"{hist.sha['A']}.json",
        record=validate_record(at_a, "at A"),
        candidate=Candidate(hist.sha["A"], 1, "merge-base of HEAD and main"),
    )
    assert find_baseline(root, "bert", "cpu-x86_64", candidates) is None


def test_history_lists_baselines_along_the_walk_nearest_first(
    hist: History, tmp_path: Path
) -> None:
    root = tmp_path / "baselines"
    for label in ["A", "C", "M", "Y"]:
        write_baseline(root, record(sha=hist.sha[label]))
    candidates = baseline_candidates(hist.path)
    found = history(root, "resnet", "cpu-x86_64", candidates, limit=5)
    # Y is on the merged side branch: not a candidate.
    assert shas([f.candidate for f in found], hist.sha) == [("M", 0), ("C", 2), ("A", 4)]
    two = history(root, "resnet", "cpu-x86_64", candidates, limit=2)
    assert [f.record["commit"] for f in two] == [hist.sha["M"], hist.sha["C"]]


def test_list_baselines_sorts_and_skips_what_is_not_a_baseline(tmp_path: Path) -> None:
    write_baseline(tmp_path, record("resnet", "cpu", SHA1, created="2024-01-02T00:00:00+00:00"))
    write_baseline(tmp_path, record("resnet", "cpu", SHA2, created="2024-01-01T00:00:00+00:00"))
    write_baseline(tmp_path, record("resnet", "cpu", "3" * 40))
    write_baseline(tmp_path, record("bert", "npu-x8", SHA1))
    (tmp_path / "README.md").write_text("how baselines work\n")
    (tmp_path / "resnet" / "cpu" / f".{SHA1}.abc.tmp").write_text("{")
    (tmp_path / "resnet" / "cpu" / "notes.json").write_text("{")
    cpu = tmp_path / "resnet" / "cpu"
    assert list_baselines(tmp_path) == [
        BaselineEntry("bert", "npu-x8", SHA1, tmp_path / "bert" / "npu-x8" / f"{SHA1}.json", None),
        BaselineEntry("resnet", "cpu", "3" * 40, cpu / f"{'3' * 40}.json", None),
        BaselineEntry("resnet", "cpu", SHA2, cpu / f"{SHA2}.json", "2024-01-01T00:00:00+00:00"),
        BaselineEntry("resnet", "cpu", SHA1, cpu / f"{SHA1}.json", "2024-01-02T00:00:00+00:00"),
    ]
    assert list_baselines(tmp_path / "none") == []


# Prune: main line m5 (tip) … m1, newest first; p1 is an open PR's head.
M = {i: f"{i:x}" * 40 for i in range(1, 6)}
P1 = "f" * 40
LINE = [M[5], M[4], M[3], M[2], M[1]]


def prune_tree(root: Path) -> None:
    for i in range(1, 6):
        write_baseline(root, record("resnet", "cpu", M[i]))
    write_baseline(root, record("resnet", "cpu", P1))
    write_baseline(root, record("bert", "cpu", M[1]))
    write_baseline(root, record("bert", "cpu", M[3]))


def remaining(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.json")}


def test_prune_keeps_the_newest_n_per_benchmark_and_env_on_the_main_line(tmp_path: Path) -> None:
    prune_tree(tmp_path)
    cpu = tmp_path / "resnet" / "cpu"
    assert prune(tmp_path, 2, LINE) == [
        cpu / f"{M[1]}.json",
        cpu / f"{M[2]}.json",
        cpu / f"{M[3]}.json",
    ]
    assert remaining(tmp_path) == {
        f"resnet/cpu/{M[5]}.json",
        f"resnet/cpu/{M[4]}.json",
        f"resnet/cpu/{P1}.json",
        f"bert/cpu/{M[1]}.json",
        f"bert/cpu/{M[3]}.json",
    }


def test_prune_dry_run_removes_nothing(tmp_path: Path) -> None:
    prune_tree(tmp_path)
    before = remaining(tmp_path)
    cpu = tmp_path / "resnet" / "cpu"
    assert prune(tmp_path, 4, LINE, dry_run=True) == [cpu / f"{M[1]}.json"]
    assert remaining(tmp_path) == before


def test_prune_removes_baselines_of_unreachable_commits_only_when_asked(tmp_path: Path) -> None:
    prune_tree(tmp_path)
    bert = tmp_path / "bert" / "cpu"
    cpu = tmp_path / "resnet" / "cpu"
    # P1, the PR head, was squash-merged: no ref reaches it. M1 is reachable but old.
    reachable = set(LINE)
    assert prune(tmp_path, 1, LINE, reachable=reachable) == [
        bert / f"{M[1]}.json",
        cpu / f"{M[1]}.json",
        cpu / f"{M[2]}.json",
        cpu / f"{M[3]}.json",
        cpu / f"{M[4]}.json",
        cpu / f"{P1}.json",
    ]
    assert remaining(tmp_path) == {f"resnet/cpu/{M[5]}.json", f"bert/cpu/{M[3]}.json"}


def test_prune_by_reachability_alone_keeps_every_reachable_baseline(tmp_path: Path) -> None:
    prune_tree(tmp_path)
    before = remaining(tmp_path)
    # Still reachable (a release branch, say) though not on the main line: it stays.
    assert prune(tmp_path, None, [], reachable={*LINE, P1}) == []
    still_reached = {*LINE, P1} - {M[3]}
    assert prune(tmp_path, None, [], reachable=still_reached) == [
        tmp_path / "bert" / "cpu" / f"{M[3]}.json",
        tmp_path / "resnet" / "cpu" / f"{M[3]}.json",
    ]
    assert remaining(tmp_path) == before - {f"bert/cpu/{M[3]}.json", f"resnet/cpu/{M[3]}.json"}


def test_prune_refuses_short_shas_and_keeping_nothing(tmp_path: Path) -> None:
    prune_tree(tmp_path)
    with pytest.raises(PerfgateError) as err:
        prune(tmp_path, 2, [M[5][:7]])
    assert str(err.value) == "prune main line: '5555555' is not a full lowercase commit sha"
    with pytest.raises(PerfgateError) as err:
        prune(tmp_path, 0, LINE)
    assert str(err.value) == "prune keep must be at least 1, got 0"
    assert len(remaining(tmp_path)) == 8


# ---------------------------------------------------------------------------------------------
# Writing files


def test_writing_through_a_symbolic_link_keeps_the_link(tmp_path: Path) -> None:
    kept = tmp_path / "kept" / "results.json"
    kept.parent.mkdir()
    kept.write_text("old")
    link = tmp_path / "results.json"
    link.symlink_to(kept)
    atomic_write(link, b"new")
    assert link.is_symlink() and kept.read_bytes() == b"new"


def test_writing_to_a_named_pipe_writes_into_it_and_leaves_the_pipe(tmp_path: Path) -> None:
    # /dev/stdout or a FIFO: a rename would put a regular file where the pipe (or, run as
    # root, the device) was; a FIFO stands in for the device, which a test cannot risk.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    atomic_write(pipe, b'{"verdict": "pass"}\n')
    reader.join(timeout=10)
    assert received == [b'{"verdict": "pass"}\n']
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left


def test_list_baselines_names_a_damaged_file_among_the_others(tmp_path: Path) -> None:
    write_baseline(tmp_path, record("resnet", "cpu", SHA1))
    write_baseline(tmp_path, record("resnet", "cpu", SHA2))
    damaged = tmp_path / "resnet" / "cpu" / f"{SHA2}.json"
    damaged.write_text(damaged.read_text()[:40])
    moved = tmp_path / "bert" / "cpu" / f"{SHA1}.json"
    moved.parent.mkdir(parents=True)
    moved.write_text((tmp_path / "resnet" / "cpu" / f"{SHA1}.json").read_text())
    # One damaged file made the whole listing an error; now each entry says what it is.
    entries = {(e.benchmark, e.sha): e for e in list_baselines(tmp_path)}
    assert entries["resnet", SHA1].problem is None
    assert str(entries["resnet", SHA2].problem).startswith(f"{damaged}: not valid JSON")
    assert entries["bert", SHA1].problem == (
        f"{moved}: key 'benchmark' is 'resnet' but the file's place says 'bert'"
    )
