"""The GitHub Action: `action.yml` and the workflows checked by real third-party checkers, and
the action's scripts run the way a runner runs them (a temporary git checkout, a real-shaped
event payload, GITHUB_STEP_SUMMARY / GITHUB_OUTPUT files, a local bare remote, and the GitHub
REST API played by an HTTP server on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

import perfgate.action.comment as comment_step_module
import perfgate.action.commit_baselines as baselines_step
import perfgate.action.fail_job as gate_step
import perfgate.action.run_benchmarks as bench_step
from perfgate.action import ERROR, PASS, REGRESSION, ActionError, overall_verdict, run_main
from perfgate.action.comment import MARKER, MAX_BODY, comment_body, job_key
from perfgate.action.commit_baselines import decide, with_token
from perfgate.action.run_benchmarks import STANDARD_CANN_ENVS, cann_script, pytest_command
from perfgate.sides import load_side

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
WORKFLOWS = sorted([*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("examples/workflows/*.yml")])
EXAMPLES = sorted(ROOT.glob("examples/workflows/*.yml"))
LEVEL1 = ROOT / "tests/data/torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt"
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
REPO = "octo-org/vision-models"


# --------------------------------------------------------------------------- helpers


def checker(name: str) -> str:
    """A checker installed from PyPI (the dev extra): next to this Python, or on PATH.
    Missing: skipped locally, a failure in CI."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.is_file() else shutil.which(name)
    if found is None:
        message = f"{name} is not installed (pip install the dev extra)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def load_yaml(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the runner's variables or proxies, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "PERFGATE_", "RUNNER_", "GIT_"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="Dev",
        GIT_AUTHOR_EMAIL="dev@example.com",
        GIT_COMMITTER_NAME="Dev",
        GIT_COMMITTER_EMAIL="dev@example.com",
    )
    env.update(extra)
    return env


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Runner:
    """What a GitHub runner gives a step: event payload, summary and output files."""

    def __init__(self, tmp: Path, event_name: str, event: dict[str, Any], ref: str) -> None:
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.event_path = tmp / "event.json"
        self.event_path.write_text(json.dumps(event), encoding="utf-8")
        self.summary = tmp / "step_summary.md"
        self.output = tmp / "github_output"
        self.summary.touch()
        self.output.touch()
        self.env = clean_env(
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME=event_name,
            GITHUB_EVENT_PATH=str(self.event_path),
            GITHUB_REF=ref,
            GITHUB_SHA=str(
                event.get("after") or event.get("pull_request", {}).get("head", {}).get("sha", "")
            ),
            GITHUB_REPOSITORY=REPO,
            GITHUB_SERVER_URL="https://github.com",
            GITHUB_API_URL="https://api.github.com",
            GITHUB_RUN_ID="4242",
            GITHUB_STEP_SUMMARY=str(self.summary),
            GITHUB_OUTPUT=str(self.output),
        )

    def step(
        self, module: str, cwd: Path, *args: str, **inputs: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``python -m perfgate.action.<module>`` as an action step with these inputs."""
        env = {**self.env, **inputs}
        return subprocess.run(
            [sys.executable, "-m", f"perfgate.action.{module}", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def call(self, main: Callable[[], int], cwd: Path, **inputs: str) -> tuple[int, str]:
        """The same step in this process (quicker, for the variations): exit status, stdout."""
        saved, here, out = dict(os.environ), Path.cwd(), io.StringIO()
        os.environ.clear()
        os.environ.update({**self.env, **inputs})
        os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
                run_main(main)
        finally:
            os.chdir(here)
            os.environ.clear()
            os.environ.update(saved)
        return int(exit_.value.code or 0), out.getvalue()

    def outputs(self) -> dict[str, str]:
        """GITHUB_OUTPUT parsed as the runner parses it (name=value and heredoc forms)."""
        result: dict[str, str] = {}
        lines = iter(self.output.read_text(encoding="utf-8").splitlines())
        for line in lines:
            if "<<" in line and "=" not in line.split("<<", 1)[0]:
                name, delimiter = line.split("<<", 1)
                body = []
                for inner in lines:
                    if inner == delimiter:
                        break
                    body.append(inner)
                result[name] = "\n".join(body)
            else:
                name, value = line.split("=", 1)
                result[name] = value
        return result


def pr_event(number: int = 7, head_sha: str = "a" * 40) -> dict[str, Any]:
    """A `pull_request` (synchronize) payload, trimmed to real keys and shape."""
    repository = {"id": 1, "full_name": REPO, "default_branch": "main", "private": False}
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "state": "open",
            "head": {"ref": "faster-attention", "sha": head_sha, "repo": repository},
            "base": {"ref": "main", "sha": "b" * 40, "repo": repository},
        },
        "repository": repository,
        "sender": {"login": "dev", "type": "User"},
    }


def push_event(after: str, before: str = "0" * 40) -> dict[str, Any]:
    """A `push` payload to main, trimmed to real keys and shape."""
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "created": False,
        "forced": False,
        "head_commit": {"id": after, "message": "Speed up the attention kernel"},
        "repository": {"id": 1, "full_name": REPO, "default_branch": "main"},
        "pusher": {"name": "dev", "email": "dev@example.com"},
    }


def results_doc(commit: str | None, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "perfgate.results",
        "format_version": 1,
        "commit": commit,
        "branch": "main",
        "dirty": False,
        "created": "2025-01-01T00:00:00+00:00",
        "runs": runs,
    }


def run_of(benchmark: str, verdict: str, env: str = "ascend910b4-x8") -> dict[str, Any]:
    return {"benchmark": benchmark, "env": env, "verdict": verdict, "samples": {"step": [0, 1]}}


REGRESSION_MD = (
    "### perfgate: 1 regression\n\n| benchmark | verdict | step time |\n|---|---|---|\n"
    "| `resnet50_train` | **REGRESSION** | +7.9% |\n"
)

FAKE_PYTHON = """#!{python}
\"\"\"Stands in for the runner's Python running `pytest --perfgate`: records how it was called,
writes the reports the plugin would, and exits as pytest would.\"\"\"
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_RECORD"], "w") as handle:
    json.dump({{"argv": args, "step_summary": os.environ.get("GITHUB_STEP_SUMMARY"),
               "cann": os.environ.get("ASCEND_TOOLKIT_HOME")}}, handle)
def path(flag):
    return args[len(args) - 1 - args[::-1].index(flag) + 1]
if os.environ.get("FAKE_RESULTS"):
    os.makedirs(path("--perfgate-out"), exist_ok=True)
    open(path("--perfgate-json"), "w").write(os.environ["FAKE_RESULTS"])
    open(path("--perfgate-md"), "w").write(os.environ["FAKE_SUMMARY"])
    if os.environ.get("FAKE_HTML"):
        open(path("--perfgate-html"), "w").write(os.environ["FAKE_HTML"])
sys.exit(int(os.environ["FAKE_EXIT"]))
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    script = tmp_path / "fake-python"
    script.write_text(FAKE_PYTHON.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    return script


# --------------------------------------------------------------------------- checkers


def test_action_yml_is_valid_for_schemastore_github_actions_schema() -> None:
    done = subprocess.run(
        [checker("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(ACTION)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


def test_every_workflow_is_valid_for_schemastore_github_workflows_schema() -> None:
    assert len(WORKFLOWS) >= 3
    done = subprocess.run(
        [checker("check-jsonschema"), "--builtin-schema", "vendor.github-workflows"]
        + [str(p) for p in WORKFLOWS],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_passes_every_workflow_and_the_inputs_they_give_the_action(
    tmp_path: Path,
) -> None:
    config = tmp_path / "actionlint.yaml"
    config.write_text("self-hosted-runner:\n  labels: [ascend]\n", encoding="utf-8")
    command = [checker("actionlint"), "-no-color", "-config-file", str(config)]
    command += ["-shellcheck", checker("shellcheck")]  # run: scripts are shellchecked too
    done = subprocess.run(
        command + [str(p.relative_to(ROOT)) for p in WORKFLOWS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # actionlint reads ./action.yml for `uses: ./`: an input it does not declare is an error.
    project = tmp_path / "project"
    broken = project / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    git(project, "init", "--quiet")
    shutil.copy(ACTION, project / "action.yml")
    broken.write_text(
        EXAMPLES[0].read_text(encoding="utf-8").replace("comment: always", "comments: always")
    )
    done = subprocess.run([*command, str(broken)], cwd=project, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    assert 'input "comments" is not defined in action "perfgate"' in done.stdout


def test_the_action_run_scripts_pass_shellcheck() -> None:
    steps = load_yaml(ACTION)["runs"]["steps"]
    scripts = run_scripts(steps)
    assert len(scripts) == 5
    for script in scripts:
        done = subprocess.run(
            [checker("shellcheck"), "--shell=bash", "-"],
            input=script,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout


def zizmor_findings(*paths: Path, persona: str = "regular") -> list[dict[str, Any]]:
    command = [checker("zizmor"), "--offline", "--format", "json", f"--persona={persona}"]
    done = subprocess.run(
        [*command, *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip().startswith("["), done.stderr
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


def test_zizmor_finds_nothing_of_medium_or_high_severity() -> None:
    # The files themselves: given the directory examples/workflows, zizmor skips it.
    for persona in ("regular", "auditor"):
        findings = zizmor_findings(ACTION, *WORKFLOWS, persona=persona)
        serious = [
            (f["ident"], f["locations"][0]["symbolic"]["key"])
            for f in findings
            if f["determinations"]["severity"] in ("Medium", "High")
        ]
        assert serious == [], persona


def test_each_accepted_zizmor_finding_is_documented_with_its_reason(tmp_path: Path) -> None:
    docs = (ROOT / "docs" / "github-action.md").read_text(encoding="utf-8")
    section = docs.split("## zizmor's findings", 1)[1].split("\n## ", 1)[0]
    ignored = []
    for path in EXAMPLES:
        workflow = load_yaml(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        for name, job in workflow["jobs"].items():
            line = next(
                (ln for ln in lines if ln.strip().startswith("runs-on:") and "zizmor" in ln), ""
            )
            runs_on = job["runs-on"]
            if isinstance(runs_on, list) and "self-hosted" in runs_on:
                ignored.append((path, name))
                assert "# zizmor: ignore[self-hosted-runner]" in line, (path, name)
                row = f"| `{path.relative_to(ROOT)}` | `{name}` | "
                assert row in section, row
                reason = section.split(row, 1)[1].split("|", 1)[0]
                assert len(reason.split()) > 15, (path, name)
    assert len(ignored) == 3  # the three medium findings the issue names
    # Without the ignore comments, the auditor persona reports exactly those three.
    copies = []
    for path in EXAMPLES:
        copies.append(tmp_path / path.name)
        copies[-1].write_text(path.read_text().replace("zizmor: ignore", "ignored"))
    bare = [
        f
        for f in zizmor_findings(*copies, persona="auditor")
        if f["determinations"]["severity"] == "Medium"
    ]
    assert sorted(f["ident"] for f in bare) == ["self-hosted-runner"] * 3


def test_third_party_actions_are_on_the_current_majors_pinned_by_commit() -> None:
    expected = {
        "actions/checkout": "3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1",
        "actions/setup-python": "5fda3b95a4ea91299a34e894583c3862153e4b97 # v7.0.0",
        "actions/upload-artifact": "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0",
        "actions/download-artifact": "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1",
    }
    documents = [ACTION, *WORKFLOWS, ROOT / "README.md", ROOT / "docs" / "github-action.md"]
    seen = set()
    for path in documents:
        for action, pin in re.findall(
            r"(actions/[\w-]+)@([0-9a-f]{40} # v[\d.]+)", path.read_text()
        ):
            assert pin == expected[action], (path.name, action, pin)
            seen.add(action)
    assert seen == set(expected)


def test_zizmor_does_flag_an_unsafe_workflow_so_the_check_above_means_something(
    tmp_path: Path,
) -> None:
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: pull_request_target\njobs:\n  a:\n    runs-on: [self-hosted, ascend]\n"
        "    steps:\n      - uses: actions/checkout@v4\n        with:\n"
        "          ref: ${{ github.event.pull_request.head.sha }}\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n',
        encoding="utf-8",
    )
    idents = {f["ident"] for f in zizmor_findings(bad)}
    assert {"dangerous-triggers", "template-injection", "unpinned-uses"} <= idents


# --------------------------------------------------------------------------- the YAML itself


def run_scripts(steps: list[dict[str, Any]]) -> list[str]:
    return [str(step["run"]) for step in steps if "run" in step]


def test_action_declares_documented_inputs_and_the_three_outputs() -> None:
    action = load_yaml(ACTION)
    inputs = action["inputs"]
    for name in (
        "pytest-args",
        "working-directory",
        "install",
        "cann-env",
        "baseline-branch",
        "update-baselines",
        "comment",
        "fail-on-regression",
        "token",
    ):
        assert inputs[name]["description"].strip(), name
        assert "default" in inputs[name], name
    assert inputs["pytest-args"]["default"] == "--perfgate"
    assert inputs["cann-env"]["default"] == "auto"
    assert inputs["update-baselines"]["default"] == "auto"
    assert inputs["token"]["default"] == "${{ github.token }}"
    assert {"verdict", "summary-path", "results-path"} <= set(action["outputs"])
    assert action["runs"]["using"] == "composite"


@pytest.mark.parametrize(
    ("install", "expected"),
    [
        ("action", ["{action}"]),
        ("action[fast]", ["{action}[fast]"]),
        ("perfgate[fast]==0.1.0 extra-pkg", ["perfgate[fast]==0.1.0", "extra-pkg"]),
        # What YAML gives around a value (`install: |` ends it with a line break): it was
        # `pip install action`, a package of PyPI, and `pip install none`.
        (" action\n", ["{action}"]),
        ("none\n", None),
        ("ACTION[FAST]", ["{action}[fast]"]),
        ("perfgate==0.1.0\nnumpy==2.0\n", ["perfgate==0.1.0", "numpy==2.0"]),  # one a line
        # Not the action form, nor another package's name: refused (no shell sees it).
        ("action[fast];touch x", "error"),
        ("actions", "error"),
        (" \n", "error"),
    ],
)
def test_the_install_step_gives_pip_the_action_ref_with_its_extras(
    tmp_path: Path, install: str, expected: list[str] | str | None
) -> None:
    (step,) = [s for s in load_yaml(ACTION)["runs"]["steps"] if s["name"] == "Install perfgate"]
    record = tmp_path / "argv.json"
    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    action = tmp_path / "action ref"  # a path with a space stays one argument
    env = clean_env(
        PERFGATE_PYTHON=str(fake), PERFGATE_INSTALL=install, GITHUB_ACTION_PATH=str(action)
    )
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert not (tmp_path / "x").exists()
    if expected == "error":
        assert done.returncode == 2
        assert done.stdout.startswith("::error::perfgate: the install input")
        assert not record.exists()
        return
    assert done.returncode == 0, done.stdout + done.stderr
    if expected is None:
        assert not record.exists()
        return
    argv = json.loads(record.read_text(encoding="utf-8"))
    assert argv[:4] == ["-m", "pip", "install", "--disable-pip-version-check"]
    assert argv[4:] == [arg.format(action=action) for arg in expected]


def test_the_steps_run_perfgates_modules_not_the_checkouts(tmp_path: Path) -> None:
    # `python -m perfgate.action.comment` in the checkout ran a pull request's own
    # perfgate/action/comment.py, with the token in its environment.
    (impostor := tmp_path / "perfgate" / "action").mkdir(parents=True)
    (tmp_path / "perfgate" / "__init__.py").write_text("")
    (impostor / "__init__.py").write_text("")
    (impostor / "fail_job.py").write_text("print('impostor ran')\n")
    (step,) = [s for s in load_yaml(ACTION)["runs"]["steps"] if s["name"] == "Gate"]
    env = clean_env(PERFGATE_PYTHON=sys.executable, PERFGATE_VERDICT="pass")
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "perfgate: pass\n"


def test_no_run_script_expands_an_expression_and_third_party_actions_are_pinned() -> None:
    documents = [load_yaml(ACTION)["runs"]["steps"]]
    for workflow in WORKFLOWS:
        for job in load_yaml(workflow)["jobs"].values():
            documents.append(job["steps"])
    for steps in documents:
        for script in run_scripts(steps):
            assert "${{" not in script, script
        for step in steps:
            uses = step.get("uses")
            if uses and not uses.startswith("./"):
                assert SHA_PIN.match(uses), uses
    text = ACTION.read_text(encoding="utf-8")
    assert re.search(r"actions/upload-artifact@[0-9a-f]{40} # v\d", text)


def test_the_action_fails_the_job_last_after_summary_artifacts_comment_and_baselines() -> None:
    steps = load_yaml(ACTION)["runs"]["steps"]
    names = [step["name"] for step in steps]
    assert names[-1] == "Gate"
    assert "perfgate.action.fail_job" in steps[-1]["run"]
    bench = names.index("Run the benchmarks")
    for later in (
        "Upload results and profiles",
        "Comment on the pull request",
        "Record and commit baselines",
    ):
        position = names.index(later)
        assert bench < position < len(names) - 1
        assert "!cancelled()" in steps[position]["if"]


def test_example_workflows_keep_fork_code_off_the_self_hosted_runner() -> None:
    assert {p.name for p in EXAMPLES} >= {"perfgate-ascend.yml", "perfgate-matrix.yml"}
    for path in EXAMPLES:
        workflow = load_yaml(path)
        triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
        assert "pull_request_target" not in triggers, path
        assert set(triggers) == {"pull_request", "push"}
        assert triggers["push"]["branches"] == ["main"]
        assert workflow["permissions"] == {}, path
        for name, job in workflow["jobs"].items():
            assert "permissions" in job, (path, name)
            runs_on = job["runs-on"]
            if isinstance(runs_on, list) and "self-hosted" in runs_on:
                # Runs on pushes only, or on pull requests from this repository only.
                condition = " ".join(job["if"].split())
                assert condition == "github.event_name == 'push'" or (
                    "github.event.pull_request.head.repo.full_name == github.repository"
                    in condition
                ), (path, name)
            if job["permissions"].get("contents") == "write":
                assert job["if"] == "github.event_name == 'push'", (path, name)
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False


def test_matrix_example_shards_upload_distinct_artifacts_and_one_job_merges_and_gates() -> None:
    workflow = load_yaml(ROOT / "examples" / "workflows" / "perfgate-matrix.yml")
    jobs = workflow["jobs"]
    shards = jobs["benchmarks"]["strategy"]["matrix"]["include"]
    assert len(shards) >= 2
    bench_step = next(s for s in jobs["benchmarks"]["steps"] if s.get("uses") == "./")
    assert bench_step["with"]["artifact-name"] == "perfgate-${{ matrix.shard }}"
    assert bench_step["with"]["fail-on-regression"] == "false"
    for name in ("gate-pull-request", "record-baselines"):
        assert jobs[name]["needs"] == "benchmarks"
        merge_step = next(s for s in jobs[name]["steps"] if s.get("uses") == "./")
        assert merge_step["with"]["merge"] == "shards/*/results.json"


# --------------------------------------------------------------------------- verdict and helpers


@pytest.mark.parametrize(
    ("verdicts", "exit_code", "expected"),
    [
        (["pass", "no-baseline", "improvement", "unstable", "incomparable"], 0, PASS),
        (["pass", "regression"], 1, REGRESSION),
        (["regression", "error"], 1, ERROR),
        (["pass"], 1, ERROR),  # pytest failed, but not for a benchmark
        (["pass"], 5, ERROR),
        (None, 0, ERROR),  # no results file
        ([], 0, ERROR),  # results of nothing (merged empty shards passed)
    ],
)
def test_overall_verdict_from_exit_code_and_run_verdicts(
    verdicts: list[str] | None, exit_code: int, expected: str
) -> None:
    runs = None if verdicts is None else [{"verdict": v} for v in verdicts]
    assert overall_verdict(runs, exit_code) == expected


def test_tests_failed_outside_the_gate_make_the_verdict_an_error_even_over_a_regression() -> None:
    runs = [{"verdict": "regression"}, {"verdict": "no-baseline"}]
    broken = [{"test": "test_io.py::test_parser", "when": "call"}]
    assert overall_verdict(runs, 1, failed_elsewhere=broken) == ERROR  # was regression
    assert overall_verdict(runs, 1, failed_elsewhere=[]) == REGRESSION
    assert overall_verdict(runs, 1) == REGRESSION  # a file that does not say: as before
    # --perfgate-strict failed the no-baseline test: its own verdict, not a broken test.
    undecided = [{"verdict": "no-baseline"}]
    assert overall_verdict(undecided, 1, strict=True, failed_elsewhere=[]) == REGRESSION
    assert overall_verdict(undecided, 1, failed_elsewhere=[]) == ERROR


def test_pytest_command_splits_arguments_like_a_shell_and_sources_cann_first(
    tmp_path: Path,
) -> None:
    script = tmp_path / "set_env.sh"
    script.write_text("export ASCEND_TOOLKIT_HOME=/opt/cann\n")
    command, results, summary = pytest_command(
        "py", "--perfgate -k 'resnet and not slow'", tmp_path / "out", script
    )
    assert command[:2] == ["bash", "-c"]
    assert command[command.index("py") :][:5] == ["py", "-m", "pytest", "--perfgate", "-k"]
    assert "resnet and not slow" in command
    assert command[-8:] == [
        "--perfgate-out", str(tmp_path / "out"),
        "--perfgate-json", str(results),
        "--perfgate-md", str(summary),
        "--perfgate-html", str(tmp_path / "out" / "report.html"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "event", "ref", "verdict", "branch"),
    [
        ("auto", "push", "refs/heads/main", "pass", "main"),
        ("auto", "push", "refs/heads/main", "regression", "main"),
        ("always", "push", "refs/heads/main", "pass", "main"),
        ("auto", "push", "refs/heads/feature", "pass", None),
        ("always", "push", "refs/heads/release", "pass", None),
        ("auto", "pull_request", "refs/pull/7/merge", "pass", None),
        ("auto", "workflow_dispatch", "refs/heads/main", "pass", None),
        ("always", "workflow_dispatch", "refs/heads/main", "pass", None),
        # Events that run with the base branch's ref, but may have checked out anything.
        ("always", "pull_request_target", "refs/heads/main", "pass", None),
        ("always", "workflow_run", "refs/heads/main", "pass", None),
        ("always", "schedule", "refs/heads/main", "pass", None),
        ("always", "issue_comment", "refs/heads/main", "pass", None),
        ("always", "push", "refs/tags/v1", "pass", None),
        ("auto", "push", "refs/heads/main", "error", None),
        ("never", "push", "refs/heads/main", "pass", None),
    ],
)
def test_baselines_are_recorded_only_on_pushes_to_the_baseline_branch(
    mode: str, event: str, ref: str, verdict: str, branch: str | None
) -> None:
    assert decide(mode, event, ref, "main", verdict)[0] == branch


def pr_head_checkout(tmp_path: Path) -> tuple[Path, Path, str]:
    """A bare remote with main, and a runner's checkout of an unreviewed PR head (a fork's
    commit) made the way a `pull_request_target` workflow that checks out the head does."""
    remote, checkout = make_remote(tmp_path)
    git(checkout, "checkout", "--quiet", "-b", "pr-head")
    (checkout / "model.py").write_text("import os  # unreviewed\n")
    git(checkout, "commit", "--quiet", "-am", "Unreviewed change")
    return remote, checkout, git(checkout, "rev-parse", "HEAD")


@pytest.mark.parametrize(
    ("event_name", "event"),
    [
        ("pull_request_target", {**pr_event(), "action": "opened"}),
        ("workflow_run", {"action": "completed", "workflow_run": {"head_branch": "pr-head"}}),
        ("schedule", {"schedule": "0 3 * * *"}),
        ("issue_comment", {"action": "created", "issue": {"number": 7}, "comment": {}}),
        ("workflow_dispatch", {"inputs": {}, "ref": "refs/heads/main"}),
    ],
)
def test_update_baselines_always_is_refused_on_every_event_but_a_push(
    tmp_path: Path, event_name: str, event: dict[str, Any]
) -> None:
    remote, checkout, unreviewed = pr_head_checkout(tmp_path)
    before = git(remote, "rev-parse", "main")
    results = real_results(checkout)
    # GITHUB_REF is the base branch for these events: the ref says nothing of the code.
    runner = Runner(tmp_path / "runner", event_name, event, "refs/heads/main")
    done = runner.step(
        "commit_baselines",
        checkout,
        "--backoff",
        "0",
        PERFGATE_UPDATE_BASELINES="always",
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::warning::perfgate: update-baselines 'always' is no longer honoured" in done.stdout
    assert (
        "::notice::perfgate: not recording baselines: baselines are recorded only on a push "
        f"to main, and this run's event is {event_name}"
    ) in done.stdout
    assert git(remote, "rev-parse", "main") == before
    never_pushed = subprocess.run(["git", "cat-file", "-e", unreviewed], cwd=remote, check=False)
    assert never_pushed.returncode != 0  # the unreviewed commit never reached the remote
    assert not (checkout / "baselines").exists()
    assert runner.outputs() == {}


def test_a_push_records_only_the_pushed_commit(tmp_path: Path) -> None:
    remote, checkout, unreviewed = pr_head_checkout(tmp_path)
    before = git(remote, "rev-parse", "main")
    results = real_results(checkout)
    # A push to main whose job checked out something else (another ref, a PR head).
    runner = Runner(tmp_path / "runner", "push", push_event(before), "refs/heads/main")
    status, stdout = runner.call(
        partial(baselines_step.main, []),
        checkout,
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
    )
    assert status == 2
    assert (
        f"::error::perfgate: HEAD is {unreviewed[:12]}, but the push to main was "
        f"{before[:12]}: baselines are recorded only for the pushed commit"
    ) in stdout
    assert git(remote, "rev-parse", "main") == before


def test_the_baseline_branch_is_the_repositorys_default_branch_from_the_event(
    tmp_path: Path,
) -> None:
    remote, checkout = make_remote(tmp_path)
    # A repository whose default branch is `trunk`; the runner's checkout (like
    # actions/checkout) has no origin/HEAD.
    git(checkout, "push", "--quiet", "origin", "HEAD:trunk")
    git(checkout, "checkout", "--quiet", "-b", "trunk", "origin/trunk")
    git(checkout, "remote", "set-head", "origin", "--delete")
    measured = git(checkout, "rev-parse", "HEAD")
    results = real_results(checkout)
    event = {**push_event(measured), "ref": "refs/heads/trunk"}
    event["repository"] = {**event["repository"], "default_branch": "trunk"}
    runner = Runner(tmp_path / "runner", "push", event, "refs/heads/trunk")
    done = runner.step(
        "commit_baselines",
        checkout,
        "--backoff",
        "0",
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pushed" in done.stdout
    assert git(remote, "log", "-1", "--format=%s", "trunk") == f"perfgate: baselines for {measured}"
    # The checkout now says so too, for perfgate's CLI and plugin in later steps.
    assert git(checkout, "symbolic-ref", "refs/remotes/origin/HEAD") == "refs/remotes/origin/trunk"


def test_push_token_goes_to_git_through_the_environment_not_the_repository_config(
    tmp_path: Path,
) -> None:
    git(tmp_path, "init", "--quiet")
    git(tmp_path, "remote", "add", "origin", f"https://github.com/{REPO}.git")
    env = with_token(tmp_path, "origin", "ghs_secret", {"GITHUB_SERVER_URL": "https://github.com"})
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraheader"
    # base64("x-access-token:ghs_secret")
    assert env["GIT_CONFIG_VALUE_0"] == "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA=="
    assert "ghs_secret" not in (tmp_path / ".git" / "config").read_text()
    # A checkout that kept its own credentials is left to them.
    git(tmp_path, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic xyz")
    assert "GIT_CONFIG_COUNT" not in with_token(tmp_path, "origin", "ghs_secret", {})


def test_a_huge_report_is_cut_to_fit_a_github_comment() -> None:
    body = comment_body(REGRESSION, "| row |\n" * 20_000, "c" * 40, "https://x/runs/1")
    assert len(body) <= MAX_BODY
    assert body.startswith(MARKER)
    assert (
        "the rest left out here: the report is too long; the whole report is in the job summary"
        in body
    )
    assert "commit `cccccccccccc`" in body


# --------------------------------------------------------------------------- the benchmark step


def test_the_baseline_branch_input_reaches_the_gate_and_line_breaks_stay_in_their_argument(
    tmp_path: Path, fake_python: Path
) -> None:
    # The input set where pushes record; pull requests into it were still looked up against
    # the default branch. And a line break in pytest-args made a line of its own in the log.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    record = tmp_path / "record.json"
    done = runner.step(
        "run_benchmarks",
        checkout,
        "--python",
        str(fake_python),
        PERFGATE_PYTEST_ARGS="--perfgate -k 'a\n::error title=forged::deleted'",
        PERFGATE_BASELINE_BRANCH="develop",
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(record),
        FAKE_RESULTS=json.dumps(results_doc("a" * 40, [run_of("bert", "pass")])),
        FAKE_SUMMARY="### perfgate: pass\n",
        FAKE_EXIT="0",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    argv = json.loads(record.read_text())["argv"]
    assert argv[:5] == [
        "-m", "pytest", "--perfgate", "-k", "a\n::error title=forged::deleted"
    ]  # fmt: skip
    assert "--perfgate-baseline-branch=develop" in argv
    assert not [line for line in done.stdout.splitlines() if line.lstrip().startswith("::error")]
    assert "a\\n::error title=forged::deleted" in done.stdout


def test_an_output_dir_inside_the_baseline_store_is_refused(
    tmp_path: Path, fake_python: Path
) -> None:
    # output-dir: baselines/out committed results.json, summary.md, report.html (and the raw
    # profiles) to main with the baselines.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    runner = Runner(tmp_path, "push", push_event("a" * 40), "refs/heads/main")
    done = runner.step(
        "run_benchmarks",
        checkout,
        "--python",
        str(fake_python),
        PERFGATE_OUTPUT_DIR="baselines/out",
        FAKE_RECORD=str(tmp_path / "record.json"),
        FAKE_EXIT="0",
    )
    assert done.returncode == 2
    assert (
        f"::error::perfgate: output-dir {checkout / 'baselines' / 'out'}: is inside the baseline "
        f"store {checkout / 'baselines'}"
    ) in done.stdout
    assert not (tmp_path / "record.json").exists()  # nothing was run


def test_bench_step_on_a_regression_writes_summary_and_outputs_and_gate_fails_the_job(
    tmp_path: Path, fake_python: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    cann = tmp_path / "set_env.sh"
    cann.write_text("export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest\n")
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    record = tmp_path / "record.json"
    results = results_doc(
        "a" * 40, [run_of("resnet50_train", "regression"), run_of("bert_infer", "pass")]
    )
    done = runner.step(
        "run_benchmarks",
        checkout,
        "--python",
        str(fake_python),
        PERFGATE_PYTEST_ARGS="--perfgate -k 'resnet or bert'",
        PERFGATE_CANN_ENV=str(cann),
        FAKE_RECORD=str(record),
        FAKE_RESULTS=json.dumps(results),
        FAKE_SUMMARY=REGRESSION_MD,
        FAKE_EXIT="1",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::error::perfgate: performance regression in resnet50_train" in done.stdout
    called = json.loads(record.read_text())
    out = checkout / "perfgate-out"
    assert called["argv"] == [
        "-m", "pytest", "--perfgate", "-k", "resnet or bert",
        "--perfgate-out", str(out),
        "--perfgate-json", str(out / "results.json"),
        "--perfgate-md", str(out / "summary.md"),
        "--perfgate-html", str(out / "report.html"),
    ]  # fmt: skip
    assert called["step_summary"] is None  # the step writes the summary itself, once
    assert called["cann"] == "/usr/local/Ascend/ascend-toolkit/latest"
    assert runner.summary.read_text() == REGRESSION_MD
    outputs = runner.outputs()
    assert outputs["verdict"] == "regression"
    assert outputs["exit-code"] == "1"
    assert outputs["results-path"] == str(out / "results.json")
    assert outputs["summary-path"] == str(out / "summary.md")
    assert outputs["output-dir"] == str(out)

    gate = runner.step("fail_job", checkout, PERFGATE_VERDICT=outputs["verdict"])
    assert gate.returncode == 1
    assert "a benchmark regressed" in gate.stdout
    status, stdout = runner.call(
        gate_step.main, checkout, PERFGATE_VERDICT="regression", PERFGATE_FAIL_ON_REGRESSION="no"
    )
    assert status == 0
    assert "::warning::perfgate: a benchmark regressed" in stdout


def test_the_html_report_is_linked_from_the_job_summary_and_the_comment(
    tmp_path: Path, fake_python: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    results = results_doc("a" * 40, [run_of("resnet50_train", "pass")])
    done = runner.step(
        "run_benchmarks",
        checkout,
        "--python",
        str(fake_python),
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(tmp_path / "record.json"),
        FAKE_RESULTS=json.dumps(results),
        FAKE_SUMMARY="### perfgate: pass\n",
        FAKE_HTML="<!DOCTYPE html><title>perfgate report</title>",
        FAKE_EXIT="0",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = checkout / "perfgate-out"
    link = (
        "📈 Plots, timelines and the advisor's hints: `report.html` in the artifact of "
        f"[this run](https://github.com/{REPO}/actions/runs/4242)."
    )
    assert link in runner.summary.read_text()
    assert link in (out / "summary.md").read_text()  # what the comment posts
    assert runner.outputs()["html-path"] == str(out / "report.html")


def test_after_recording_the_push_job_reports_new_change_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_history import main_line_repo

    # Ten baselines at 100 ms, then the newest three at 110 ms: a change that just entered.
    shas = main_line_repo(tmp_path / "repo", [100_000.0] * 10 + [110_000.0] * 3)
    results = tmp_path / "results.json"
    run = {"benchmark": "mlp", "env": "cpu-x86_64", "verdict": "pass", "samples": {"step": [0]}}
    results.write_text(json.dumps(results_doc(shas[-1], [run])))
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    baselines_step.report_new_change_points(tmp_path / "repo", results)
    text = summary.read_text()
    assert text.startswith("### perfgate history: new change points on the main line")
    assert re.search(r"- `mlp` on `cpu-x86_64`: \+(9|10)\.\d% \(", text)
    assert f"entered main after {shas[9][:12]}, within 1 commit(s) up to {shas[10][:12]}" in text
    assert text.rstrip().endswith("(new)")


def test_bench_step_that_passes_lets_the_gate_pass(tmp_path: Path, fake_python: Path) -> None:
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    done = runner.step(
        "run_benchmarks",
        tmp_path,
        "--python",
        str(fake_python),
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(tmp_path / "record.json"),
        FAKE_RESULTS=json.dumps(results_doc("a" * 40, [run_of("resnet50_train", "no-baseline")])),
        FAKE_SUMMARY="### perfgate: 1 benchmark, no baseline yet\n",
        FAKE_EXIT="0",
    )
    assert done.returncode == 0, done.stderr
    assert runner.outputs()["verdict"] == "pass"
    assert runner.summary.read_text() == "### perfgate: 1 benchmark, no baseline yet\n"
    assert runner.call(gate_step.main, tmp_path, PERFGATE_VERDICT="pass")[0] == 0


def test_a_pull_request_that_changes_the_baselines_is_told_so(
    tmp_path: Path, fake_python: Path
) -> None:
    _remote, checkout = make_remote(tmp_path)
    stored = checkout / "baselines" / "loop" / "cpu-x86_64" / f"{'c' * 40}.json"
    stored.parent.mkdir(parents=True)
    stored.write_text("{}\n")
    git(checkout, "add", "baselines")
    git(checkout, "commit", "--quiet", "-m", "perfgate: baselines")
    git(checkout, "push", "--quiet", "origin", "HEAD:main")
    # The pull request's branch deletes the baseline it would be judged against: the gate
    # read the store as the pull request left it, said no-baseline, and nobody was told.
    git(checkout, "checkout", "--quiet", "-b", "faster-attention")
    git(checkout, "rm", "--quiet", "-r", "baselines")
    git(checkout, "commit", "--quiet", "-m", "Speed up the attention kernel")
    runner = Runner(tmp_path / "pr", "pull_request", pr_event(), "refs/pull/7/merge")
    done = runner.step(
        "run_benchmarks",
        checkout,
        "--python",
        str(fake_python),
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(tmp_path / "record.json"),
        FAKE_RESULTS=json.dumps(results_doc("a" * 40, [run_of("loop", "no-baseline")])),
        FAKE_SUMMARY="### perfgate: 1 benchmark, no baseline yet\n",
        FAKE_EXIT="0",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = (
        "this pull request changes 1 file(s) of the baseline store, and the gate read the "
        "baselines as it leaves them: `D baselines/loop/cpu-x86_64/"
        f"{'c' * 40}.json`. Baselines are recorded by the push to the baseline branch; "
        "review these changes as you would the code's"
    )
    assert f"::warning::perfgate: {said}" in done.stdout
    summary = (checkout / "perfgate-out" / "summary.md").read_text()
    assert summary.startswith(f"> [!WARNING]\n> {said}\n\n### perfgate: 1 benchmark")
    # A pull request that leaves the store alone hears nothing of it.
    git(checkout, "checkout", "--quiet", "main")
    done = runner.step(
        "run_benchmarks",
        checkout,
        "--python",
        str(fake_python),
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(tmp_path / "record.json"),
        FAKE_RESULTS=json.dumps(results_doc("a" * 40, [run_of("loop", "pass")])),
        FAKE_SUMMARY="### perfgate: ✅ pass\n",
        FAKE_EXIT="0",
    )
    assert "baseline store" not in done.stdout
    assert (checkout / "perfgate-out" / "summary.md").read_text() == "### perfgate: ✅ pass\n"


def test_a_crashed_run_is_an_error_even_with_a_stale_report_left_on_a_self_hosted_runner(
    tmp_path: Path, fake_python: Path
) -> None:
    stale = tmp_path / "perfgate-out"
    stale.mkdir()
    (stale / "results.json").write_text(json.dumps(results_doc("f" * 40, [])))
    (stale / "summary.md").write_text("### perfgate: all passed (an old run)\n")
    runner = Runner(tmp_path, "push", push_event("a" * 40), "refs/heads/main")
    done = runner.step(
        "run_benchmarks",
        tmp_path,
        "--python",
        str(fake_python),
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(tmp_path / "record.json"),
        FAKE_EXIT="3",
    )
    assert done.returncode == 0
    assert "::error::perfgate: pytest exited with 3 (internal error)" in done.stdout
    outputs = runner.outputs()
    assert outputs["verdict"] == "error"
    assert outputs["results-path"] == ""
    summary = runner.summary.read_text()
    assert "perfgate could not gate this run" in summary
    assert "an old run" not in summary
    assert runner.call(gate_step.main, tmp_path, PERFGATE_VERDICT="error")[0] == 1
    # A benchmark step that itself failed leaves no verdict: the gate fails too.
    assert runner.call(gate_step.main, tmp_path, PERFGATE_VERDICT="")[0] == 1


def test_a_shallow_checkout_is_an_error_before_the_benchmarks_run(
    tmp_path: Path, fake_python: Path
) -> None:
    remote, _ = make_remote(tmp_path)
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "--quiet", "--depth", "1", f"file://{remote}", str(shallow))
    runner = Runner(tmp_path / "runner", "pull_request", pr_event(), "refs/pull/7/merge")
    record = tmp_path / "record.json"
    done = runner.step(
        "run_benchmarks",
        shallow,
        "--python",
        str(fake_python),
        PERFGATE_CANN_ENV="none",
        FAKE_RECORD=str(record),
        FAKE_RESULTS=json.dumps(results_doc("a" * 40, [run_of("resnet50_train", "no-baseline")])),
        FAKE_SUMMARY="### perfgate: no baseline\n",
        FAKE_EXIT="0",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not record.exists()  # pytest never started
    assert (
        "::error::perfgate: this checkout is a shallow clone, so the baselines of earlier "
        "commits cannot be found and the gate would be silently off; the benchmarks were not "
        "run. Set `fetch-depth: 0` on actions/checkout"
    ) in done.stdout
    outputs = runner.outputs()
    assert outputs["verdict"] == "error"
    assert outputs["results-path"] == ""
    assert "Set `fetch-depth: 0` on actions/checkout" in runner.summary.read_text()
    assert runner.call(gate_step.main, shallow, PERFGATE_VERDICT=outputs["verdict"])[0] == 1
    # Merging shards' results needs no history: a shallow checkout is fine for it.
    write_shard(shallow, "one", "a" * 40, [run_of("resnet50_train", "pass")])
    merged = Runner(tmp_path / "merge", "pull_request", pr_event(), "refs/pull/7/merge")
    done = merged.step("run_benchmarks", shallow, PERFGATE_MERGE="shards/*/results.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert merged.outputs()["verdict"] == "pass"


def test_a_cann_script_that_does_not_exist_is_an_input_error(tmp_path: Path) -> None:
    runner = Runner(tmp_path, "push", push_event("a" * 40), "refs/heads/main")
    status, stdout = runner.call(
        partial(bench_step.main, []), tmp_path, PERFGATE_CANN_ENV=str(tmp_path / "nope.sh")
    )
    assert status == 2
    assert "::error::perfgate: cann-env:" in stdout
    assert "does not exist" in stdout


def test_cann_env_auto_finds_the_script_of_an_install_as_the_runners_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only /usr/local/Ascend/ascend-toolkit/set_env.sh was looked for; CANN installed as a
    # non-root user (a self-hosted runner's usual case) puts it under ~/Ascend, and CANN 8.5
    # under …/Ascend/cann: the benchmarks ran without msprof, and the example was skipped.
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not any(Path(p).is_file() for p in STANDARD_CANN_ENVS if p.startswith("/"))
    assert cann_script("auto") is None
    for place in ("cann", "ascend-toolkit"):  # the toolkit's is first
        script = tmp_path / "Ascend" / place / "set_env.sh"
        script.parent.mkdir(parents=True)
        script.write_text("export ASCEND_TOOLKIT_HOME=/opt/cann\n")
        assert cann_script("auto") == script
    assert cann_script("none") is None


def test_a_bug_in_a_step_is_one_error_annotation_and_status_2_not_a_bare_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = Runner(tmp_path, "push", push_event("a" * 40), "refs/heads/main")

    def broken() -> int:
        raise KeyError("a bug")

    status, stdout = runner.call(broken, tmp_path)
    assert status == 2
    assert stdout == (
        "::error::perfgate: internal error: KeyError (a bug in perfgate; please report it with "
        "the traceback in the step's log)\n"
    )
    assert "KeyError: 'a bug'" in capsys.readouterr().err

    def too_big() -> int:
        raise MemoryError

    status, stdout = runner.call(too_big, tmp_path)
    assert (status, stdout) == (
        2,
        "::error::perfgate: out of memory: the input is too large for this runner\n",
    )


def write_shard(root: Path, name: str, commit: str, runs: list[dict[str, Any]]) -> Path:
    shard = root / "shards" / f"perfgate-{name}"
    shard.mkdir(parents=True)
    (shard / "results.json").write_text(json.dumps(results_doc(commit, runs)))
    (shard / "summary.md").write_text(f"### shard {name} report\n")
    return shard / "results.json"


def test_merge_mode_gates_the_shards_results_as_one(tmp_path: Path) -> None:
    write_shard(tmp_path, "vision", "a" * 40, [run_of("resnet50_train", "pass")])
    write_shard(
        tmp_path,
        "llm",
        "a" * 40,
        [run_of("llama_infer", "regression"), run_of("bert_infer", "improvement")],
    )
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    done = runner.step("run_benchmarks", tmp_path, PERFGATE_MERGE="shards/*/results.json")
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = runner.outputs()
    assert outputs["verdict"] == "regression"
    merged = json.loads(Path(outputs["results-path"]).read_text())
    assert merged["format"] == "perfgate.results"
    assert merged["format_version"] == 2
    assert merged["commit"] == "a" * 40
    # Sorted by path: the llm shard comes before the vision shard.
    assert [r["benchmark"] for r in merged["runs"]] == [
        "llama_infer", "bert_infer", "resnet50_train"
    ]  # fmt: skip
    summary = runner.summary.read_text()
    assert "### perfgate: 3 benchmarks from 2 shards" in summary
    assert "| `llama_infer` | `ascend910b4-x8` | **REGRESSION** | `perfgate-llm` |" in summary
    assert "### shard vision report" in summary


def test_merge_refuses_shards_of_different_commits_or_a_benchmark_run_twice(
    tmp_path: Path,
) -> None:
    write_shard(tmp_path, "one", "a" * 40, [run_of("resnet50_train", "pass")])
    write_shard(tmp_path, "two", "a" * 40, [run_of("resnet50_train", "pass")])
    write_shard(tmp_path, "three", "c" * 40, [run_of("bert_infer", "pass")])
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    main = partial(bench_step.main, [])
    both = "shards/perfgate-one/*.json shards/perfgate-two/*.json"
    status, stdout = runner.call(main, tmp_path, PERFGATE_MERGE=both)
    assert status == 2
    assert "benchmark 'resnet50_train' on 'ascend910b4-x8' is in both" in stdout
    status, stdout = runner.call(main, tmp_path, PERFGATE_MERGE="shards/*/results.json")
    assert status == 2
    assert "the shards measured different commits" in stdout
    status, stdout = runner.call(main, tmp_path, PERFGATE_MERGE="nowhere/*.json")
    assert status == 2
    assert "merge: no results files match 'nowhere/*.json'" in stdout
    status, stdout = runner.call(main, tmp_path, PERFGATE_MERGE="'shards/*")  # was a traceback
    assert status == 2
    assert 'merge: cannot split "\'shards/*" into patterns (No closing quotation)' in stdout


def test_a_shard_downloaded_into_the_output_dir_is_refused_not_deleted(tmp_path: Path) -> None:
    """The stale outputs are deleted before a run: a shard sitting at output-dir/results.json
    (download-artifact into the default output-dir) was deleted, then left out of the merge,
    and the other shards' pass was the job's verdict."""
    regressed = write_shard(tmp_path, "llm", "a" * 40, [run_of("llama_infer", "regression")])
    write_shard(tmp_path, "vision", "a" * 40, [run_of("resnet50_train", "pass")])
    written = regressed.read_text()
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    main = partial(bench_step.main, [])
    for patterns in ("shards/*/results.json", "shards/perfgate-llm/results.json"):
        status, stdout = runner.call(
            main, tmp_path, PERFGATE_MERGE=patterns, PERFGATE_OUTPUT_DIR="shards/perfgate-llm"
        )
        assert status == 2, stdout
        assert (
            "::error::perfgate: merge: shards/perfgate-llm/results.json is a shard to merge and "
            "also this action's own output (results.json in output-dir"
        ) in stdout
        assert regressed.read_text() == written  # nothing deleted
    done = runner.step(
        "run_benchmarks", tmp_path, PERFGATE_MERGE="shards/*/results.json"
    )  # the default output-dir: both shards gated
    assert done.returncode == 0, done.stdout + done.stderr
    assert runner.outputs()["verdict"] == "regression"


@pytest.mark.parametrize("variable", ["GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"])
@pytest.mark.parametrize("where", ["a directory", "in a missing folder"])
def test_a_runner_file_that_cannot_be_appended_to_is_one_error_line(
    tmp_path: Path, variable: str, where: str
) -> None:
    write_shard(tmp_path, "vision", "a" * 40, [run_of("resnet50_train", "pass")])
    runner = Runner(tmp_path / "runner", "pull_request", pr_event(), "refs/pull/7/merge")
    target = tmp_path / "runner" / ("summary_dir" if where == "a directory" else "gone/file")
    if where == "a directory":
        target.mkdir()
    status, stdout = runner.call(
        partial(bench_step.main, []),
        tmp_path,
        PERFGATE_MERGE="shards/*/results.json",
        **{variable: str(target)},
    )
    assert status == 2, stdout
    reason = "Is a directory" if where == "a directory" else "No such file or directory"
    assert f"::error::perfgate: {variable}={target}: cannot append to it ({reason})" in stdout
    assert "internal error" not in stdout


def test_a_pull_request_target_run_of_the_base_branch_does_not_judge_the_pull_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the default checkout (the base branch) it measured main and commented "no
    # regression" on the fork's pull request.
    _, checkout = make_remote(tmp_path)
    base = git(checkout, "rev-parse", "HEAD")
    git(checkout, "checkout", "--quiet", "-b", "fork")
    (checkout / "model.py").write_text("STEPS = 20\n")
    git(checkout, "commit", "--quiet", "-am", "Slower")
    head = git(checkout, "rev-parse", "HEAD")
    git(checkout, "checkout", "--quiet", "main")
    git(checkout, "merge", "--quiet", "--no-ff", "-m", "Merge", "fork")
    merge = git(checkout, "rev-parse", "HEAD")
    event = pr_event(7, head_sha=head)
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request_target")
    said = bench_step.not_the_pull_request(checkout, event, base)
    assert said == (
        f"it measured {base[:12]}, which is neither the pull request's head {head[:12]} nor a "
        "merge of it (pull_request_target checks out the base branch unless told otherwise): "
        "it does not judge the pull request"
    )
    assert bench_step.not_the_pull_request(checkout, event, head) is None
    assert bench_step.not_the_pull_request(checkout, event, merge) is None
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")  # checks out the merge
    assert bench_step.not_the_pull_request(checkout, event, base) is None


def test_a_job_without_a_checkout_that_records_nothing_does_not_fail(tmp_path: Path) -> None:
    """A merge-only job (shards' artifacts, no checkout) on a schedule: no git repository to
    ask for the default branch, and nothing to record; it failed asking."""
    for event_name in ("schedule", "pull_request_target", "workflow_dispatch"):
        runner = Runner(tmp_path / event_name, event_name, {}, "refs/heads/main")
        status, stdout = runner.call(
            partial(baselines_step.main, []), tmp_path / event_name, PERFGATE_VERDICT="pass"
        )
        assert status == 0, stdout
        assert (
            "::notice::perfgate: not recording baselines: baselines are recorded only on a push "
            f"to the default branch, and this run's event is {event_name}"
        ) in stdout
    runner = Runner(tmp_path / "push", "push", push_event("a" * 40), "refs/heads/main")
    status, stdout = runner.call(
        partial(baselines_step.main, []), tmp_path / "push", PERFGATE_VERDICT="pass"
    )
    assert status == 2  # a push may record: where to, git must say
    assert "not inside a git repository" in stdout


def test_a_merge_keeps_the_failed_tests_of_the_shards_that_list_them(tmp_path: Path) -> None:
    from perfgate.action.merge_results import merge
    from perfgate.records import validate_results

    broken = {"test": "test_io.py::test_parser", "when": "call"}
    new = {**results_doc("a" * 40, [run_of("bert", "pass")]), "failed_elsewhere": [broken]}
    new["strict"] = True
    old = results_doc("a" * 40, [run_of("resnet", "pass")])  # a shard of an older perfgate
    shards = [
        (tmp_path / name, validate_results(doc, name)) for name, doc in (("new", new), ("old", old))
    ]
    merged = merge(shards)
    # The older shard's lack of the key dropped the other's failed test: a pass.
    assert merged["failed_elsewhere"] == [broken]
    # One strict shard made every shard's undecided verdicts fail the merged job.
    assert merged["strict"] is False


def test_merging_shards_that_measured_nothing_is_an_error_not_a_pass(tmp_path: Path) -> None:
    write_shard(tmp_path, "empty", "a" * 40, [])
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    runner.step("run_benchmarks", tmp_path, PERFGATE_MERGE="shards/*/results.json")
    assert runner.outputs()["verdict"] == "error"
    assert "holds no benchmark runs: nothing was measured" in runner.summary.read_text()


def test_merged_runs_without_a_verdict_are_named(tmp_path: Path) -> None:
    run = run_of("resnet50_train", "pass")
    del run["verdict"]  # another tool's shard
    write_shard(tmp_path, "other", "a" * 40, [run])
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    runner.step("run_benchmarks", tmp_path, PERFGATE_MERGE="shards/*/results.json")
    assert runner.outputs()["verdict"] == "error"
    summary = runner.summary.read_text()
    # It said "pytest reported failed tests", where pytest never ran.
    assert "runs without a known verdict in " in summary and "`resnet50_train`" in summary


# --------------------------------------------------------------------------- the PR comment


# Who each test token acts as, as GitHub answers: GraphQL's viewer for every kind of
# token; GET /user for user tokens only (an installation token gets 403 there).
TOKENS = {
    "ghs_test_token": ("github-actions[bot]", "Bot"),  # the workflow's GITHUB_TOKEN
    "ghs_app_token": ("perfgate-app[bot]", "Bot"),  # a GitHub App installation token
    "ghp_user_token": ("perf-bot", "User"),  # a personal access token
}


class FakeGitHub:
    """The issue-comment, user and GraphQL viewer endpoints of the GitHub API, in memory,
    on 127.0.0.1. Comments carry their author, the identity of the token that wrote them."""

    def __init__(self, status: int = 200, graphql: bool = True) -> None:
        self.comments: dict[int, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.status = status
        self.graphql = graphql
        self.next_id = 1000
        self.heads: dict[int, str] = {}  # pull request → its head commit, where told
        github = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                auth = self.headers.get("Authorization", "")
                github.requests.append((self.command, self.path, auth))
                if github.status != 200:
                    self.reply(github.status, {"message": "Resource not accessible by integration"})
                    return
                token = auth.removeprefix("Bearer ")
                self.reply(*github.route(self.command, self.path, body, token))

            do_GET = do_POST = do_PATCH = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def add_comment(self, issue: int, login: str, body: str, kind: str = "User") -> int:
        """A comment someone else wrote."""
        self.next_id += 1
        self.comments[self.next_id] = {
            "id": self.next_id,
            "issue": issue,
            "user": {"login": login, "type": kind},
            "body": body,
            "html_url": f"https://github.com/{REPO}/pull/{issue}#issuecomment-{self.next_id}",
        }
        return self.next_id

    def route(self, method: str, path: str, body: Any, token: str) -> tuple[int, Any]:
        if token not in TOKENS:
            return 401, {"message": "Bad credentials"}
        login, kind = TOKENS[token]
        if path == "/graphql" and method == "POST":
            if not self.graphql:
                return 404, {"message": "Not Found"}
            assert "viewer" in body["query"]
            return 200, {"data": {"viewer": {"login": login}}}
        if path == "/user" and method == "GET":
            if kind == "Bot":
                return 403, {"message": "Resource not accessible by integration"}
            return 200, {"login": login, "type": kind}
        pull = re.fullmatch(rf"/repos/{REPO}/pulls/(\d+)", path)
        if pull and method == "GET" and int(pull.group(1)) in self.heads:
            return 200, {
                "number": int(pull.group(1)),
                "head": {"sha": self.heads[int(pull.group(1))]},
            }
        listing = re.fullmatch(rf"/repos/{REPO}/issues/(\d+)/comments(?:\?(.*))?", path)
        single = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", path)
        if listing and method == "GET":
            query = dict(p.split("=") for p in (listing.group(2) or "").split("&") if p)
            size, page = int(query.get("per_page", 30)), int(query.get("page", 1))
            mine = [c for c in self.comments.values() if c["issue"] == int(listing.group(1))]
            return 200, mine[(page - 1) * size : page * size]
        if listing and method == "POST":
            number = self.add_comment(int(listing.group(1)), login, body["body"], kind)
            return 201, self.comments[number]
        if single and method == "PATCH" and int(single.group(1)) in self.comments:
            # GitHub lets a token with pull-requests: write edit anyone's comment on the
            # repository: only the action itself can keep to its own.
            comment = self.comments[int(single.group(1))]
            comment["body"] = body["body"]
            return 200, comment
        return 404, {"message": "Not Found"}

    def __enter__(self) -> FakeGitHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def comment_step(
    runner: Runner,
    api: FakeGitHub,
    verdict: str,
    report: str,
    mode: str = "always",
    *,
    token: str = "ghs_test_token",
    subprocess_: bool = False,
) -> tuple[int, str]:
    """The comment step with this verdict and report: exit status and stdout."""
    summary = runner.tmp / f"summary-{len(api.requests)}.md"
    summary.write_text(report)
    runner.env["GITHUB_API_URL"] = api.url
    runner.env["GITHUB_GRAPHQL_URL"] = f"{api.url}/graphql"
    inputs = {
        "PERFGATE_TOKEN": token,
        "PERFGATE_COMMENT": mode,
        "PERFGATE_VERDICT": verdict,
        "PERFGATE_SUMMARY_PATH": str(summary),
    }
    if subprocess_:
        done = runner.step("comment", runner.tmp, **inputs)
        return done.returncode, done.stdout + done.stderr
    return runner.call(comment_step_module.main, runner.tmp, **inputs)


def test_pr_comment_is_created_once_then_updated_in_place(tmp_path: Path, api: FakeGitHub) -> None:
    # Someone else's 120 comments first: the marker is looked for past the first page.
    for n in range(120):
        api.add_comment(7, f"reviewer{n % 3}", f"LGTM {n}")
    runner = Runner(tmp_path, "pull_request", pr_event(7, head_sha="d" * 40), "refs/pull/7/merge")
    status, stdout = comment_step(runner, api, "regression", REGRESSION_MD, subprocess_=True)
    assert status == 0, stdout
    assert "created the PR comment" in stdout
    ours = [c for c in api.comments.values() if MARKER in c["body"]]
    assert len(ours) == 1
    assert "❌ perfgate: performance regression" in ours[0]["body"]
    assert "| `resnet50_train` | **REGRESSION** | +7.9% |" in ours[0]["body"]
    assert "commit `dddddddddddd`" in ours[0]["body"]
    assert f"[workflow run](https://github.com/{REPO}/actions/runs/4242)" in ours[0]["body"]
    assert runner.outputs()["comment-url"].endswith(f"#issuecomment-{ours[0]['id']}")

    status, stdout = comment_step(
        runner, api, "pass", "### perfgate: all 1 benchmarks pass\n", subprocess_=True
    )
    assert status == 0, stdout
    assert "updated the PR comment" in stdout
    again = [c for c in api.comments.values() if MARKER in c["body"]]
    assert [c["id"] for c in again] == [ours[0]["id"]]
    assert "✅ perfgate: no regression" in again[0]["body"]
    assert "REGRESSION" not in again[0]["body"]
    methods = [(m, p.split("?")[0]) for m, p, _ in api.requests]
    assert methods.count(("POST", f"/repos/{REPO}/issues/7/comments")) == 1
    assert methods.count(("PATCH", f"/repos/{REPO}/issues/comments/{ours[0]['id']}")) == 1
    assert {auth for _, _, auth in api.requests} == {"Bearer ghs_test_token"}


def test_two_jobs_keep_a_comment_each_and_take_over_the_one_comment_of_before(
    tmp_path: Path, api: FakeGitHub
) -> None:
    # The comment written before comments were kept per job: one marker, no job named.
    older = api.add_comment(7, "github-actions[bot]", f"{MARKER}\n### old report", "Bot")
    runner = Runner(tmp_path, "pull_request", pr_event(7, head_sha="d" * 40), "refs/pull/7/merge")
    # A CUDA job and an Ascend job of one workflow: each replaced the other's report.
    cuda = dict(GITHUB_WORKFLOW="perf", GITHUB_JOB="cuda", PERFGATE_ARTIFACT_NAME="perfgate")
    npu = dict(GITHUB_WORKFLOW="perf", GITHUB_JOB="ascend", PERFGATE_ARTIFACT_NAME="perfgate")
    runner.env.update(cuda)
    assert comment_step(runner, api, "regression", REGRESSION_MD)[0] == 0
    runner.env.update(npu)
    status, stdout = comment_step(runner, api, "pass", "### perfgate: all 1 benchmarks pass\n")
    assert status == 0 and "created the PR comment" in stdout, stdout
    ours = {c["id"]: c["body"] for c in api.comments.values() if MARKER in c["body"]}
    assert len(ours) == 2
    # The CUDA job took the old comment over; the Ascend job wrote its own.
    assert "<!-- perfgate-job: perf / cuda / perfgate -->" in ours[older]
    assert "❌ perfgate: performance regression" in ours[older]
    assert "job `perf / cuda / perfgate`" in ours[older]
    (ascend,) = set(ours) - {older}
    assert "<!-- perfgate-job: perf / ascend / perfgate -->" in ours[ascend]
    assert "✅ perfgate: no regression" in ours[ascend]
    # The next run of each job updates its own comment and leaves the other's.
    runner.env.update(cuda)
    status, stdout = comment_step(runner, api, "pass", "### perfgate: all 1 benchmarks pass\n")
    assert "updated the PR comment" in stdout
    assert "✅ perfgate: no regression" in api.comments[older]["body"]
    runner.env.update(npu)
    comment_step(runner, api, "regression", REGRESSION_MD)
    assert "❌ perfgate: performance regression" in api.comments[ascend]["body"]
    assert "✅ perfgate: no regression" in api.comments[older]["body"]
    assert len([c for c in api.comments.values() if MARKER in c["body"]]) == 2
    # Matrix legs share the job id; their artifact names tell them apart.
    runner.env.update(cuda, PERFGATE_ARTIFACT_NAME="perfgate-a100")
    assert "created the PR comment" in comment_step(runner, api, "pass", "### all pass\n")[1]
    assert len([c for c in api.comments.values() if MARKER in c["body"]]) == 3


def test_a_job_name_cannot_end_the_hidden_marker() -> None:
    body = comment_body("pass", "all pass", "a" * 40, "", job_key("x --> <b>", "j", ""))
    marker_line = body.splitlines()[1]
    assert marker_line == "<!-- perfgate-job: x - - b / j -->"
    assert marker_line.count("-->") == 1


def test_a_rerun_of_an_older_commit_leaves_the_comment_of_the_newer_one(
    tmp_path: Path, api: FakeGitHub
) -> None:
    newer = Runner(tmp_path, "pull_request", pr_event(7, head_sha="b" * 40), "refs/pull/7/merge")
    api.heads[7] = "b" * 40
    assert comment_step(newer, api, "regression", REGRESSION_MD)[0] == 0
    # Attempt 2 of the older commit's job: its green verdict replaced the newer red one.
    older = Runner(tmp_path, "pull_request", pr_event(7, head_sha="a" * 40), "refs/pull/7/merge")
    status, stdout = comment_step(older, api, "pass", "### perfgate: all pass\n")
    assert status == 0
    assert "the pull request's head is now bbbbbbbbbbbb, not aaaaaaaaaaaa" in stdout
    [comment] = api.comments.values()
    assert "❌ perfgate: performance regression" in comment["body"]


def test_a_step_that_ended_without_a_verdict_replaces_an_earlier_green_comment(
    tmp_path: Path, api: FakeGitHub
) -> None:
    runner = Runner(tmp_path, "pull_request", pr_event(7), "refs/pull/7/merge")
    assert comment_step(runner, api, "pass", "### perfgate: all pass\n")[0] == 0
    # The next push: the shards could not be merged, the job is red, no verdict was set.
    status, _ = runner.call(
        comment_step_module.main,
        runner.tmp,
        PERFGATE_TOKEN="ghs_test_token",
        PERFGATE_COMMENT="always",
        PERFGATE_VERDICT="",
        PERFGATE_SUMMARY_PATH="",
    )
    assert status == 0
    [comment] = api.comments.values()
    assert "⚠️ perfgate: the benchmarks could not be gated" in comment["body"]
    assert "The benchmark step ended before it had a verdict" in comment["body"]


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (403, "the token needs pull-requests: write"),
        (404, "the token cannot see this pull request or repository"),
        (502, "GitHub's API failed: the next run writes the comment"),
    ],
)
def test_a_failed_comment_says_what_the_answer_means(
    tmp_path: Path, status: int, said: str
) -> None:
    # Every failure blamed the token's permissions, a 502 from GitHub included.
    with FakeGitHub(status=status) as api:
        runner = Runner(tmp_path, "pull_request", pr_event(7), "refs/pull/7/merge")
        code, stdout = comment_step(runner, api, "regression", REGRESSION_MD)
    assert code == 0
    assert f"could not write the PR comment: HTTP {status}" in stdout
    assert said in stdout


def test_quiet_comments_appear_only_when_something_is_wrong_and_then_stay_current(
    tmp_path: Path, api: FakeGitHub
) -> None:
    runner = Runner(tmp_path, "pull_request", pr_event(8), "refs/pull/8/merge")
    status, stdout = comment_step(runner, api, "pass", "all good", mode="quiet")
    assert status == 0
    assert "no comment created" in stdout
    assert api.comments == {}
    comment_step(runner, api, "regression", REGRESSION_MD, mode="quiet")
    assert len(api.comments) == 1
    comment_step(runner, api, "pass", "all good again", mode="quiet")
    (only,) = api.comments.values()
    assert "✅ perfgate: no regression" in only["body"]
    assert "all good again" in only["body"]


def test_no_comment_on_a_push_or_when_disabled(tmp_path: Path, api: FakeGitHub) -> None:
    push = Runner(tmp_path, "push", push_event("a" * 40), "refs/heads/main")
    assert "not a PR" in comment_step(push, api, "regression", REGRESSION_MD)[1]
    pr = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    assert "disabled" in comment_step(pr, api, "regression", REGRESSION_MD, mode="never")[1]
    assert api.requests == []


def test_a_read_only_token_makes_the_comment_a_warning_not_a_failure(tmp_path: Path) -> None:
    with FakeGitHub(status=403) as api:
        runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
        status, stdout = comment_step(runner, api, "regression", REGRESSION_MD)
    assert status == 0
    assert "::warning::perfgate: could not write the PR comment: HTTP 403" in stdout
    assert "pull-requests: write" in stdout


def test_a_marker_in_someone_elses_comment_is_never_followed(
    tmp_path: Path, api: FakeGitHub
) -> None:
    # An outsider pastes the marker and a green headline, hoping the action edits it.
    forged = f"{MARKER}\n### ✅ perfgate: no regression\n\nall good, merge it\n"
    outsider = api.add_comment(7, "mallory", forged)
    other_bot = api.add_comment(7, "perfgate-app[bot]", f"{MARKER}\nanother app's", "Bot")
    runner = Runner(tmp_path, "pull_request", pr_event(7), "refs/pull/7/merge")
    status, stdout = comment_step(runner, api, "regression", REGRESSION_MD, subprocess_=True)
    assert status == 0, stdout
    assert "created the PR comment" in stdout
    assert api.comments[outsider]["body"] == forged
    assert api.comments[other_bot]["body"] == f"{MARKER}\nanother app's"
    ours = [c for c in api.comments.values() if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1
    assert "❌ perfgate: performance regression" in ours[0]["body"]
    # The next run finds its own comment by author and marker, and edits only that one.
    status, stdout = comment_step(runner, api, "pass", "### perfgate: all pass\n")
    assert "updated the PR comment" in stdout
    patched = [p for m, p, _ in api.requests if m == "PATCH"]
    assert patched == [f"/repos/{REPO}/issues/comments/{ours[0]['id']}"]
    assert api.comments[outsider]["body"] == forged
    assert ("POST", "/graphql", "Bearer ghs_test_token") in api.requests


@pytest.mark.parametrize(
    ("token", "graphql", "author"),
    [
        ("ghs_test_token", True, "github-actions[bot]"),  # GITHUB_TOKEN: GraphQL viewer
        ("ghs_app_token", True, "perfgate-app[bot]"),  # an App's installation token
        ("ghp_user_token", True, "perf-bot"),  # a personal access token
        ("ghp_user_token", False, "perf-bot"),  # no GraphQL (an old GHES): GET /user
    ],
)
def test_the_comment_to_update_is_the_one_the_tokens_own_identity_wrote(
    tmp_path: Path, token: str, graphql: bool, author: str
) -> None:
    with FakeGitHub(graphql=graphql) as api:
        for login in {"github-actions[bot]", "perfgate-app[bot]", "perf-bot"}:
            api.add_comment(7, login, f"{MARKER}\nold report of {login}")
        runner = Runner(tmp_path, "pull_request", pr_event(7), "refs/pull/7/merge")
        status, stdout = comment_step(runner, api, "pass", "fresh", token=token)
    assert status == 0, stdout
    assert "updated the PR comment" in stdout
    changed = {c["user"]["login"] for c in api.comments.values() if "fresh" in c["body"]}
    assert changed == {author}
    assert len(api.comments) == 3


def test_a_token_whose_identity_cannot_be_learned_creates_a_comment_and_edits_none(
    tmp_path: Path,
) -> None:
    # GITHUB_TOKEN where GraphQL is unavailable: GET /user answers 403 for it.
    with FakeGitHub(graphql=False) as api:
        mine = api.add_comment(7, "github-actions[bot]", f"{MARKER}\nold", "Bot")
        runner = Runner(tmp_path, "pull_request", pr_event(7), "refs/pull/7/merge")
        status, stdout = comment_step(runner, api, "regression", REGRESSION_MD)
    assert status == 0
    assert "::warning::perfgate: could not learn which account the token acts as" in stdout
    assert "created the PR comment" in stdout
    assert api.comments[mine]["body"] == f"{MARKER}\nold"
    assert [m for m, _, _ in api.requests].count("PATCH") == 0


HOSTILE_OP = "Mat|Mul`<img src=x onerror=alert(1)>`@octo-org/admins [x](https://evil.example)"


def hostile_comparison_results(tmp_path: Path) -> tuple[Path, Path]:
    """A results file as `pytest --perfgate` writes it, for a real profile whose operators
    were renamed to something hostile."""
    record: dict[str, Any] = dict(
        load_side(LEVEL1, benchmark="resnet50_train", env="ascend910b4-x1").records[0]
    )
    slow = json.loads(json.dumps(record))
    for op in slow["operators"]:
        op["op_type"] = HOSTILE_OP
    for op in record["operators"]:
        op["op_type"] = HOSTILE_OP
    slow["samples"]["step_time_us"] = [v * 1.5 for v in slow["samples"]["step_time_us"]]
    for op in slow["operators"]:
        op["time_per_step_us"] = op["time_per_step_us"] * 2
    baseline_file = tmp_path / "baseline.json"
    baseline_file.write_text(
        json.dumps(
            {"format": "perfgate.baseline", "format_version": 1, "commit": "b" * 40, **record}
        )
    )
    current_file = tmp_path / "current.json"
    current_file.write_text(json.dumps(results_doc("a" * 40, [slow])))
    return baseline_file, current_file


def test_operator_names_reach_the_summary_and_the_comment_as_text(
    tmp_path: Path, api: FakeGitHub
) -> None:
    baseline_file, current_file = hostile_comparison_results(tmp_path)
    command = [sys.executable, "-m", "perfgate", "compare", str(baseline_file)]
    done = subprocess.run(
        [*command, str(current_file), "--format", "md", "--top", "3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    report = done.stdout
    assert not re.search(r"(?<!\\)<img", report)  # only escaped, as text
    assert "\\<img src=x onerror=alert(1)\\>" in report
    assert "@octo-org" not in report
    assert "@\u200docto-org/admins" in report
    assert "\\[x\\](https\u200d://evil.example)" in report  # no link, and no autolink
    # Every table row still has its 8 columns: the '|' in the name is escaped.
    rows = [line for line in report.splitlines() if line.startswith("| Mat")]
    assert rows
    for row in rows:
        assert "Mat\\|Mul\\`" in row
        assert len(re.findall(r"(?<!\\)\|", row)) == 9
    runner = Runner(tmp_path, "pull_request", pr_event(7), "refs/pull/7/merge")
    assert comment_step(runner, api, "regression", report)[0] == 0
    (body,) = [c["body"] for c in api.comments.values()]
    assert not re.search(r"(?<!\\)<img", body)
    assert "@octo-org" not in body


def test_a_hostile_shard_name_and_benchmark_cannot_break_the_merged_table(tmp_path: Path) -> None:
    write_shard(tmp_path, "x|`<b>@octo-org", "a" * 40, [run_of("resnet50_train", "pass")])
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    done = runner.step("run_benchmarks", tmp_path, PERFGATE_MERGE="shards/*/results.json")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = runner.summary.read_text()
    assert (
        "| `resnet50_train` | `ascend910b4-x8` | pass | perfgate-x\\|\\`\\<b\\>@\u200docto-org |"
        in (summary)
    )


# --------------------------------------------------------------------------- baselines


def make_remote(tmp_path: Path) -> tuple[Path, Path]:
    """A bare 'GitHub' remote with one commit on main, and a runner's checkout of it."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "--quiet", str(remote), str(seed))
    (seed / "model.py").write_text("STEPS = 10\n")
    (seed / ".gitignore").write_text("perfgate-out/\n")
    git(seed, "add", ".")
    git(seed, "commit", "--quiet", "-m", "Model")
    git(seed, "push", "--quiet", "origin", "HEAD:main")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "--quiet", "--branch", "main", str(remote), str(checkout))
    return remote, checkout


def real_results(checkout: Path) -> Path:
    """A results file holding the record of a real torch_npu profile, for HEAD."""
    record: dict[str, Any] = dict(
        load_side(LEVEL1, benchmark="resnet50_train", env="ascend910b4-x1").records[0]
    )
    record["verdict"] = "pass"
    path = checkout / "perfgate-out" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps(results_doc(git(checkout, "rev-parse", "HEAD"), [record])))
    return path


def test_push_to_main_commits_the_baseline_and_wins_a_push_race(tmp_path: Path) -> None:
    remote, checkout = make_remote(tmp_path)
    measured = git(checkout, "rev-parse", "HEAD")
    results = real_results(checkout)
    # While the benchmarks ran, someone else pushed to main.
    other = tmp_path / "other"
    git(tmp_path, "clone", "--quiet", str(remote), str(other))
    (other / "README.md").write_text("hello\n")
    git(other, "add", ".")
    git(other, "commit", "--quiet", "-m", "Docs")
    git(other, "push", "--quiet", "origin", "HEAD:main")
    raced = git(other, "rev-parse", "HEAD")

    runner = Runner(tmp_path, "push", push_event(measured), "refs/heads/main")
    done = runner.step(
        "commit_baselines",
        checkout,
        "--backoff",
        "0",
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "push rejected (attempt 1/5)" in done.stdout
    assert "(attempt 2/5)" in done.stdout
    head = git(remote, "rev-parse", "main")
    assert runner.outputs()["baseline-commit"] == head
    subject, author, parent = git(remote, "log", "-1", "--format=%s%n%an <%ae>%n%P", "main").split(
        "\n"
    )
    assert subject == f"perfgate: baselines for {measured}"
    assert author == "github-actions[bot] <41898282+github-actions[bot]@users.noreply.github.com>"
    assert parent == raced  # rebased onto the other push
    path = f"baselines/resnet50_train/ascend910b4-x1/{measured}.json"
    assert git(remote, "diff-tree", "--no-commit-id", "--name-only", "-r", "main") == path
    baseline = json.loads(git(remote, "show", f"main:{path}"))
    assert baseline["format"] == "perfgate.baseline"
    assert baseline["commit"] == measured
    assert len(baseline["samples"]["step_time_us"]) == len(baseline["samples"]["step"]) > 0
    assert git(remote, "show", "main:README.md") == "hello"


def test_a_rerun_that_records_the_same_commit_again_replaces_the_earlier_baseline(
    tmp_path: Path,
) -> None:
    remote, checkout = make_remote(tmp_path)
    path = "baselines/resnet50_train/ascend910b4-x1/" + git(checkout, "rev-parse", "HEAD") + ".json"
    first = tmp_path / "first-run"
    git(tmp_path, "clone", "--quiet", str(remote), str(first))
    (first / path).parent.mkdir(parents=True)
    (first / path).write_text('{"run": 1}\n')
    git(first, "add", ".")
    git(first, "commit", "--quiet", "-m", "perfgate: baselines (first run)")
    git(first, "push", "--quiet", "origin", "HEAD:main")
    (checkout / path).parent.mkdir(parents=True)
    (checkout / path).write_text('{"run": 2}\n')
    # A writer killed mid-write (SIGKILL) left its hidden temporary file: never committed.
    leftover = (checkout / path).parent / f".{Path(path).stem}.2jl4v7ht.tmp"
    leftover.write_text('{"ru')
    with contextlib.redirect_stdout(io.StringIO()) as out:
        sha = baselines_step.commit_and_push(
            checkout,
            ["baselines"],
            "perfgate: baselines (re-run)",
            "main",
            backoff=0,
            env=clean_env(),
        )
    assert "push rejected (attempt 1/5)" in out.getvalue()
    assert sha == git(remote, "rev-parse", "main")
    assert json.loads(git(remote, "show", f"main:{path}")) == {"run": 2}
    assert git(remote, "ls-tree", "-r", "--name-only", "main", "baselines") == path


def test_a_refused_push_says_gits_reason_and_is_not_retried(tmp_path: Path) -> None:
    # A protected branch was retried 5 times (30 s of waits) and ended in git's last line,
    # "failed to push some refs", without GitHub's reason.
    remote, checkout = make_remote(tmp_path)
    counter = tmp_path / "pushes"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\necho x >> {counter}\n"
        "echo 'error: GH006: Protected branch update failed for refs/heads/main.' >&2\nexit 1\n"
    )
    hook.chmod(0o755)
    results = real_results(checkout)
    runner = Runner(
        tmp_path, "push", push_event(git(checkout, "rev-parse", "HEAD")), "refs/heads/main"
    )
    done = runner.step(
        "commit_baselines",
        checkout,
        "--backoff",
        "0",
        PERFGATE_VERDICT="regression",
        PERFGATE_RESULTS_PATH=str(results),
    )
    assert done.returncode == 2
    assert "could not push the baselines to main: remote: error: GH006: Protected branch " in (
        done.stdout
    )
    assert "the token needs contents: write" in done.stdout
    assert counter.read_text().count("x") == 1


def test_a_race_lost_every_time_stops_after_the_bounded_number_of_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, checkout = make_remote(tmp_path)
    (checkout / "baselines").mkdir()
    (checkout / "baselines" / "b.json").write_text("{}\n")
    real_git, pushes = baselines_step.git, []

    def always_behind(repo: Path, *args: str, **kwargs: Any) -> Any:
        if args[0] != "push":
            return real_git(repo, *args, **kwargs)
        pushes.append(args)
        rejected = " ! [rejected]        HEAD -> main (fetch first)\nerror: failed to push"
        return subprocess.CompletedProcess(args, 1, "", rejected)

    monkeypatch.setattr(baselines_step, "git", always_behind)
    with (
        contextlib.redirect_stdout(io.StringIO()),
        pytest.raises(ActionError, match="could not push the baselines to main after 3 attempts"),
    ):
        baselines_step.commit_and_push(
            checkout, ["baselines"], "m", "main", attempts=3, backoff=0, env=clean_env()
        )
    assert len(pushes) == 3


def test_a_commit_force_pushed_away_is_not_put_back_with_its_baselines(tmp_path: Path) -> None:
    # The push job of M recorded its baselines after M was amended to M' and force-pushed:
    # the rebase replayed M itself onto M', and M's version of its files won.
    remote, checkout = make_remote(tmp_path)
    (checkout / "config.py").write_text("TOKEN = 'leaked'\n")
    git(checkout, "add", "config.py")
    git(checkout, "commit", "--quiet", "-m", "M: add config")
    git(checkout, "push", "--quiet", "origin", "HEAD:main")
    developer = tmp_path / "developer"
    git(tmp_path, "clone", "--quiet", str(remote), str(developer))
    (developer / "config.py").write_text("TOKEN = None\n")
    git(developer, "commit", "--quiet", "--amend", "-am", "M': add config (no secret)")
    git(developer, "push", "--quiet", "--force", "origin", "HEAD:main")
    amended = git(developer, "rev-parse", "HEAD")
    (checkout / "baselines").mkdir()
    (checkout / "baselines" / "b.json").write_text("{}\n")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        sha = baselines_step.commit_and_push(
            checkout, ["baselines"], "perfgate: baselines", "main", backoff=0, env=clean_env()
        )
    assert sha is None
    assert "is no longer on main (force-pushed away?)" in out.getvalue()
    assert git(remote, "rev-parse", "main") == amended
    assert git(remote, "show", "main:config.py") == "TOKEN = None"


def test_a_baseline_branch_that_is_no_branch_is_said_and_a_ref_is_its_branch(
    tmp_path: Path,
) -> None:
    # `origin/main` or `Main`: every push said "not a push to origin/main" in a plain log
    # line, and no baseline was ever recorded.
    remote, checkout = make_remote(tmp_path)
    before = git(remote, "rev-parse", "main")
    results = real_results(checkout)
    main = partial(baselines_step.main, ["--backoff", "0"])
    push = Runner(tmp_path, "push", push_event(before), "refs/heads/main")
    status, stdout = push.call(
        main,
        checkout,
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
        PERFGATE_BASELINE_BRANCH="origin/main",
    )
    assert status == 0, stdout
    assert (
        "::warning::perfgate: not recording baselines: baseline-branch 'origin/main' is no "
        "branch of the repository"
    ) in stdout
    assert git(remote, "rev-parse", "main") == before
    status, stdout = push.call(
        main,
        checkout,
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
        PERFGATE_BASELINE_BRANCH="refs/heads/main",
    )
    assert status == 0, stdout
    assert git(remote, "rev-parse", "main") != before  # recorded


def test_no_baseline_commit_on_a_pull_request_or_a_failed_run(tmp_path: Path) -> None:
    remote, checkout = make_remote(tmp_path)
    before = git(remote, "rev-parse", "main")
    results = real_results(checkout)
    main = partial(baselines_step.main, [])
    pr = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    status, stdout = pr.call(
        main, checkout, PERFGATE_VERDICT="pass", PERFGATE_RESULTS_PATH=str(results)
    )
    assert status == 0
    assert (
        "not recording baselines: baselines are recorded only on a push to main, and this "
        "run's event is pull_request" in stdout
    )
    push = Runner(tmp_path, "push", push_event(before), "refs/heads/main")
    status, stdout = push.call(
        main, checkout, PERFGATE_VERDICT="error", PERFGATE_RESULTS_PATH=str(results)
    )
    assert status == 0
    assert "not recording baselines: the benchmark run did not complete" in stdout
    assert git(remote, "rev-parse", "main") == before
    assert not (checkout / "baselines").exists()


def test_a_baseline_commit_is_not_itself_benchmarked_into_another(tmp_path: Path) -> None:
    remote, checkout = make_remote(tmp_path)
    git(checkout, "commit", "--quiet", "--allow-empty", "-m", "perfgate: baselines for 123")
    git(checkout, "push", "--quiet", "origin", "HEAD:main")
    results = real_results(checkout)
    before = git(remote, "rev-parse", "main")
    runner = Runner(tmp_path, "push", push_event(before), "refs/heads/main")
    status, stdout = runner.call(
        partial(baselines_step.main, []),
        checkout,
        PERFGATE_VERDICT="pass",
        PERFGATE_RESULTS_PATH=str(results),
    )
    assert status == 0
    assert "HEAD is itself a baseline commit" in stdout
    assert git(remote, "rev-parse", "main") == before


# --------------------------------------------------------------------------- end to end


def _push_to_main(checkout: Path, path: str, message: str) -> str:
    """Commit ``path`` and push it to main; the commit's sha."""
    git(checkout, "add", path)
    git(checkout, "commit", "--quiet", "-m", message)
    git(checkout, "push", "--quiet", "origin", "HEAD:main")
    return git(checkout, "rev-parse", "HEAD")


def _record_then_open_a_pull_request(
    push: Runner, outputs: dict[str, str], checkout: Path, remote: Path, measured: str
) -> Runner:
    """The push job's recording step on ``measured``, then a pull request's runner on top."""
    recorded = push.step(
        "commit_baselines",
        checkout,
        PERFGATE_VERDICT=outputs["verdict"],
        PERFGATE_RESULTS_PATH=outputs["results-path"],
    )
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert git(remote, "log", "-1", "--format=%s", "main") == f"perfgate: baselines for {measured}"
    git(checkout, "pull", "--quiet", "--rebase", "origin", "main")
    return Runner(push.tmp.parent / "pr", "pull_request", pr_event(), "refs/pull/7/merge")


@pytest.mark.slow
def test_the_steps_around_the_real_pytest_plugin_record_on_main_then_gate_a_slower_pr(
    tmp_path: Path,
) -> None:
    pytest.importorskip(
        "perfgate.pytest_plugin.plugin", reason="the pytest plugin is not installed"
    )
    remote, checkout = make_remote(tmp_path)
    (checkout / "test_bench.py").write_text(
        "import os, time\n\n"
        "def test_loop(perfgate):\n"
        "    delay = float(os.environ.get('DELAY', '0.002'))\n"
        "    perfgate.run(lambda: time.sleep(delay), steps=20, warmup=2)\n"
    )
    measured = _push_to_main(checkout, "test_bench.py", "A benchmark")
    args = "--perfgate --perfgate-profiler=none -p no:cacheprovider test_bench.py"

    push = Runner(tmp_path / "push", "push", push_event(measured), "refs/heads/main")
    bench = push.step(
        "run_benchmarks", checkout, PERFGATE_PYTEST_ARGS=args, PERFGATE_CANN_ENV="none"
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    outputs = push.outputs()
    assert outputs["verdict"] == "pass"  # no baseline yet
    pr = _record_then_open_a_pull_request(push, outputs, checkout, remote, measured)
    bench = pr.step(
        "run_benchmarks",
        checkout,
        PERFGATE_PYTEST_ARGS=args,
        PERFGATE_CANN_ENV="none",
        DELAY="0.008",  # 4x: time.sleep overshoots under load, 2x is no gross change
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert pr.outputs()["verdict"] == "regression", pr.summary.read_text() + bench.stdout
    assert "step_time" in pr.summary.read_text()
    assert pr.call(gate_step.main, checkout, PERFGATE_VERDICT="regression")[0] == 1


def test_a_regression_hides_no_broken_test_and_strict_still_records_on_main(
    tmp_path: Path,
) -> None:
    pytest.importorskip(
        "perfgate.pytest_plugin.plugin", reason="the pytest plugin is not installed"
    )
    remote, checkout = make_remote(tmp_path)
    (checkout / "test_bench.py").write_text(
        "import os, time\n"
        "import pytest\n\n"
        "def test_loop(perfgate):\n"
        "    delay = float(os.environ.get('DELAY', '0.002'))\n"
        "    perfgate.run(lambda: time.sleep(delay), steps=20, warmup=2)\n\n"
        "@pytest.mark.xfail('DELAY' in os.environ, reason='a known slow path')\n"
        "def test_known(perfgate):\n"
        "    delay = float(os.environ.get('DELAY', '0.002'))\n"
        "    perfgate.run(lambda: time.sleep(delay), steps=20, warmup=2)\n\n"
        "def test_parser():\n"
        "    assert os.environ.get('PARSER_BROKEN') is None, 'the parser is broken'\n"
    )
    measured = _push_to_main(checkout, "test_bench.py", "A benchmark")
    args = "--perfgate --perfgate-profiler=none -p no:cacheprovider test_bench.py"

    # --perfgate-strict fails no-baseline: pytest exit 1 read as "failed tests, no
    # regression", an error, so the first baseline was never recorded, push after push.
    push = Runner(tmp_path / "push", "push", push_event(measured), "refs/heads/main")
    bench = push.step(
        "run_benchmarks",
        checkout,
        PERFGATE_PYTEST_ARGS=f"{args} --perfgate-strict",
        PERFGATE_CANN_ENV="none",
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    outputs = push.outputs()
    assert (outputs["verdict"], outputs["exit-code"]) == ("regression", "1"), bench.stdout
    # It said "performance regression in " and named nothing.
    assert (
        "::error::perfgate: --perfgate-strict fails undecided verdicts: known (no-baseline), "
        "loop (no-baseline)"
    ) in bench.stdout
    pr = _record_then_open_a_pull_request(push, outputs, checkout, remote, measured)
    bench = pr.step(
        "run_benchmarks",
        checkout,
        PERFGATE_PYTEST_ARGS=args,
        PERFGATE_CANN_ENV="none",
        DELAY="0.008",
        PARSER_BROKEN="1",
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    # The regression was the verdict, and with fail-on-regression false the job was green
    # over a failed test; the xfail benchmark's regression (pytest: xfailed) was reported.
    assert pr.outputs()["verdict"] == "error", bench.stdout
    results = json.loads(Path(pr.outputs()["results-path"]).read_text())
    assert [(r["benchmark"], r["verdict"]) for r in results["runs"]] == [("loop", "regression")]
    assert results["failed_elsewhere"] == [{"test": "test_bench.py::test_parser", "when": "call"}]
    said = "pytest failed 1 test(s) for other reasons than a verdict: `test_bench.py::test_parser`"
    assert said in bench.stdout
    # The comment's body and the artifact are summary.md: they said only the table.
    summary = Path(pr.outputs()["summary-path"]).read_text()
    assert summary.startswith("> [!CAUTION]\n> **perfgate could not gate this run**: " + said)
    assert pr.summary.read_text() == summary
    assert pr.call(gate_step.main, checkout, PERFGATE_VERDICT="error")[0] == 1


def test_ab_mode_on_a_pull_request_measures_against_the_merge_base(
    tmp_path: Path, fake_python: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    git(checkout, "init", "--quiet", "--initial-branch=main")
    (checkout / "model.py").write_text("v1\n")
    git(checkout, "add", "-A")
    git(checkout, "commit", "--quiet", "-m", "v1")
    base = git(checkout, "rev-parse", "HEAD")
    git(checkout, "update-ref", "refs/remotes/origin/main", base)
    git(checkout, "checkout", "--quiet", "-b", "faster-attention")
    (checkout / "model.py").write_text("v2\n")
    git(checkout, "commit", "--quiet", "-am", "v2")
    record = tmp_path / "record.json"

    def ab_run(runner: Runner, verdict: str, summary: str = "") -> subprocess.CompletedProcess[str]:
        return runner.step(
            "run_benchmarks",
            checkout,
            "--python",
            str(fake_python),
            PERFGATE_MODE="ab",
            PERFGATE_CANN_ENV="none",
            FAKE_RECORD=str(record),
            FAKE_RESULTS=json.dumps(results_doc(None, [run_of("resnet50_train", verdict)])),
            FAKE_SUMMARY=summary,
            FAKE_EXIT="0",
        )

    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    done = ab_run(runner, "pass", "### perfgate: pass\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"perfgate: A/B against the merge-base {base[:12]}" in done.stdout
    argv = json.loads(record.read_text())["argv"]
    assert argv[:4] == ["-m", "pytest", "--perfgate", f"--perfgate-ab={base}"]
    # A push is never an A/B run: it records the stored baselines.
    ab_run(Runner(tmp_path / "push", "push", push_event(base), "refs/heads/main"), "recorded")
    assert not any(a.startswith("--perfgate-ab") for a in json.loads(record.read_text())["argv"])
    # Nor is a manual run; it says so (it fell back to the stored baselines in silence).
    manual = Runner(tmp_path / "manual", "workflow_dispatch", {}, "refs/heads/main")
    done = ab_run(manual, "pass")
    assert "::notice::perfgate: mode 'ab' measures a pull request against its merge-base; " in (
        done.stdout
    )
    assert "this 'workflow_dispatch' run has none" in done.stdout
    assert not any(a.startswith("--perfgate-ab") for a in json.loads(record.read_text())["argv"])


class OddGitHub(FakeGitHub):
    """A GitHub API (or a proxy before it) whose answers have another shape."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer

    def route(self, method: str, path: str, body: Any, token: str) -> tuple[int, Any]:
        if "/comments" in path and method == "GET" and self.answer == "comment without id":
            return 200, [{"body": MARKER, "user": {"login": TOKENS[token][0]}}]
        if "/comments" in path and method == "POST" and self.answer == "a list":
            return 201, []
        return super().route(method, path, body, token)


@pytest.mark.parametrize("answer", ["comment without id", "a list"])
def test_an_odd_api_answer_costs_the_comment_not_the_job(tmp_path: Path, answer: str) -> None:
    # Each was a traceback and exit 2 (KeyError 'id'; AttributeError on the list).
    with OddGitHub(answer) as api:
        runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
        status, stdout = comment_step(runner, api, "pass", "all good")
    assert status == 0, stdout
    if answer == "comment without id":
        assert "::warning::perfgate: could not write the PR comment: the GitHub API " in stdout
    else:
        assert "created the PR comment" in stdout


def test_odd_event_payloads_are_one_line_or_ignored(tmp_path: Path, api: FakeGitHub) -> None:
    runner = Runner(tmp_path, "pull_request", pr_event(), "refs/pull/7/merge")
    event = pr_event()
    event["pull_request"]["head"] = "faster-attention"  # a string: was AttributeError
    runner.event_path.write_text(json.dumps(event))
    status, stdout = comment_step(runner, api, "pass", "all good")
    assert status == 0 and "created the PR comment" in stdout
    runner.event_path.unlink()  # a pull_request run without its payload: was silent
    status, stdout = comment_step(runner, api, "pass", "all good")
    assert status == 0
    assert "::warning::perfgate: a 'pull_request' run, but its event payload" in stdout
    runner.event_path.write_bytes(b"\xff\xfe{}")  # not UTF-8: was UnicodeDecodeError
    status, stdout = comment_step(runner, api, "pass", "all good")
    assert status == 2
    assert f"GITHUB_EVENT_PATH={runner.event_path}: not valid JSON (not UTF-8 text)" in stdout
    runner.event_path.write_text("[" * 100_000 + "]" * 100_000)  # was a RecursionError traceback
    status, stdout = comment_step(runner, api, "pass", "all good")
    assert status == 2 and "Traceback" not in stdout
    assert f"GITHUB_EVENT_PATH={runner.event_path}: JSON nested too deep to be a webhook" in stdout


def test_an_output_dir_below_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{}")
    runner = Runner(tmp_path, "push", push_event("a" * 40), "refs/heads/main")
    done = runner.step(
        "run_benchmarks", tmp_path, PERFGATE_OUTPUT_DIR=str(tmp_path / "report.json" / "out")
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr  # was NotADirectoryError
    assert f"output-dir {tmp_path / 'report.json' / 'out'}: cannot be used (Not a directory)" in (
        done.stdout + done.stderr
    )
