"""`perfgate history`: the metric along the main line, change points (PELT from ruptures)
with the commits they entered in, and slow creep, on baselines written into a real git
repository (one commit per baseline, as the action's push job leaves them)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import git
import numpy as np
import pytest
from conftest import GitRepo

from perfgate.analysis.history import Point, analyse, change_indexes, series_noise
from perfgate.cli import main
from perfgate.records import BASELINE_FORMAT, BASELINE_FORMAT_VERSION
from perfgate.rules import default_rules
from perfgate.store.baselines import write_baseline

STEP_TIME = default_rules().metrics["step_time"]


def baseline(
    benchmark: str, commit: git.Commit, centre_us: float, rng: np.random.Generator
) -> dict[str, Any]:
    """A baseline of 5 rounds of 5 steps whose round medians sit at ``centre_us`` (±0.1%)."""
    steps = [centre_us * math.exp(rng.normal(0, 0.001)) for _ in range(25)]
    return {
        "format": BASELINE_FORMAT,
        "format_version": BASELINE_FORMAT_VERSION,
        "benchmark": benchmark,
        "env": "cpu-x86_64",
        "commit": commit.hexsha,
        "commit_time": commit.committed_datetime.isoformat(),
        "samples": {"step": list(range(5)), "step_time_us": steps[:5]},
        "timing": {
            "step_time_us": steps,
            "round": [float(i // 5) for i in range(25)],
            "process": [0.0] * 25,
        },
    }


def main_line_repo(path: Path, centres: Sequence[float | None], seed: int = 7) -> list[str]:
    """A repository whose main branch has one commit per entry of ``centres`` and, where the
    entry is not None, a baseline of benchmark ``mlp`` at that commit; noise 0.3% between
    commits. Returns the shas, oldest first."""
    repo = GitRepo(path)
    rng = np.random.default_rng(seed)
    shas = []
    for index, centre in enumerate(centres):
        repo.write("model.py", f"version = {index}\n")
        commit = repo.repo.commit(repo.commit(f"model v{index}", "model.py"))
        shas.append(commit.hexsha)
        if centre is not None:
            noisy = centre * math.exp(rng.normal(0, 0.003))
            write_baseline(path / "baselines", baseline("mlp", commit, noisy, rng))
    return shas


def creep_series() -> list[float | None]:
    """100 ms for 10 commits, then 10 commits each 1.5% slower, then 10 at that level."""
    return [100_000.0 * 1.015 ** min(max(i - 9, 0), 10) for i in range(30)]


def test_slow_creep_of_ten_small_steps_surfaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = main_line_repo(tmp_path, creep_series())
    assert main(["history", "mlp", "--repo", str(tmp_path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["schema"], document["schema_version"]) == ("perfgate.history", 1)
    [history] = document["histories"]
    assert [p["commit"] for p in history["points"]] == shas
    changes = history["change_points"]
    # PELT cuts the ramp (commits 10–19) into a few steps, all up, all inside it…
    assert len(changes) >= 2
    assert all(c["bad"] for c in changes)
    assert all(shas.index(c["after"]) in range(10, 21) for c in changes)
    # …that add up to the whole creep, though no commit moved it by more than ~1.5%.
    [creep] = history["creep"]
    assert creep["change"] == pytest.approx(1.015**10 - 1, abs=0.01)  # +16.1%
    assert creep["changes"] == len(changes)
    assert creep["largest_step"] < 0.03
    assert main(["history", "mlp", "--repo", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "slow creep: step_time moved +16." in table
    assert "while no step between neighbouring baselines passed the +5% limit" in table


def test_a_step_change_names_the_commit_range_it_entered_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 24 commits with a baseline on every other one; step time 8% up from commit 14 on.
    centres: list[float | None] = [
        (100_000.0 if i < 14 else 108_000.0) if i % 2 == 0 else None for i in range(24)
    ]
    shas = main_line_repo(tmp_path, centres)
    assert main(["history", "mlp", "--repo", str(tmp_path), "--format", "json"]) == 0
    [history] = json.loads(capsys.readouterr().out)["histories"]
    [change] = history["change_points"]
    # The last baseline before the change is commit 12's, the first after it commit 14's:
    # the change entered in commits 13–14.
    assert (change["before"], change["after"], change["commits"]) == (shas[12], shas[14], 2)
    assert change["change"] == pytest.approx(0.08, abs=0.01)
    assert change["exceeds"] and not history["creep"]
    assert main(["history", "mlp", "--repo", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "change point: +8." in table
    assert (
        f"entered main after {shas[12][:12]}, within 2 commit(s) up to {shas[14][:12]}; "
        "beyond the +5% limit" in table
    )
    # The row under the commit it entered at says the change and its direction in words.
    rows = table.splitlines()
    [at] = [i for i, line in enumerate(rows) if line.startswith(shas[14][:12])]
    change_cell, word = rows[at + 1].split()
    assert change_cell.startswith("+8.") and word == "worse"


def test_a_flat_history_has_no_change_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_line_repo(tmp_path, [100_000.0] * 20)
    assert main(["history", "mlp", "--repo", str(tmp_path), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("### perfgate history: `mlp` on `cpu-x86_64`")
    assert "no change point: one level along these commits" in markdown


def test_false_change_points_are_rare_on_flat_noisy_series() -> None:
    """The penalty (docs/history.md): flat series of 30 commits with 1% noise."""
    rng = np.random.default_rng(3)
    found = sum(bool(change_indexes(rng.normal(0, 0.01, 30), 0.01)) for _ in range(200))
    assert found <= 4  # ≤ 2%
    steps = [np.r_[np.zeros(15), np.full(15, math.log(1.08))] + rng.normal(0, 0.01, 30)]
    assert change_indexes(steps[0], 0.01) == [15]


def test_one_odd_commit_is_no_change_point() -> None:
    # A +30% spike at one commit made two change points, +14% "after" the commit before it
    # (which measured the old level) and -12% after the spike, at a level no commit had.
    rng = np.random.default_rng(5)
    spiked = 0
    for _ in range(200):
        values = rng.normal(0, 0.01, 12)
        values[5] += math.log(1.3)
        spiked += bool(change_indexes(values, series_noise(values)))
    assert spiked <= 6  # as rare as on a flat series (it was every one)
    # Two odd commits in a row are a level: a regression and its fix, both found.
    values = rng.normal(0, 0.01, 12)
    values[5:7] += math.log(1.3)
    assert change_indexes(values, series_noise(values)) == [5, 7]


def test_history_renders_html_and_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main_line_repo(tmp_path / "repo", creep_series())
    repo = str(tmp_path / "repo")
    page = tmp_path / "history.html"
    assert main(["history", "mlp", "--repo", repo, "--format", "html", "-o", str(page)]) == 0
    html = page.read_text()
    assert html.count('<figure class="chart" data-chart="history">') == 1
    assert "slow creep: step_time moved +16." in html
    assert "<script src" not in html and "http://" not in html.split("<svg", 1)[0]
    chart = tmp_path / "history.png"
    assert main(["history", "mlp", "--repo", repo, "--format", "png", "-o", str(chart)]) == 0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["history", "mlp", "--repo", repo, "--format", "png"]) == 2
    assert "--format png writes a file: give -o FILE.png" in capsys.readouterr().err


def test_too_few_baselines_say_so() -> None:
    points = [
        Point(
            commit=f"{i:040x}",
            date=None,
            back=3 - i,
            centre=1.0,
            low=1.0,
            high=1.0,
            rounds=1,
            scaled=0.0,
        )
        for i in range(3)
    ]
    history = analyse(points, STEP_TIME, benchmark="mlp", env="cpu")
    assert history.change_points == []
    assert history.note == "3 baseline(s): change points need 4 or more"


def test_no_baseline_within_the_depth_says_how_far_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The one baseline is 5 commits back: "no baselines on the main line" was untrue.
    main_line_repo(tmp_path / "repo", [1000.0, None, None, None, None, None])
    repo = str(tmp_path / "repo")
    assert main(["history", "mlp", "--repo", repo, "--max-depth", "2", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (only,) = document["histories"]
    assert only["note"] == (
        "no baselines on the main line within the 2 commit(s) looked at (--max-depth 2)"
    )
    # A PNG of no point was an empty chart, exit 0.
    png = tmp_path / "h.png"
    args = ["history", "mlp", "--repo", repo, "--max-depth", "2", "--format", "png", "-o", str(png)]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "perfgate: error: history of 'mlp': no baselines on the main line within the 2 "
        "commit(s) looked at (--max-depth 2): no chart to draw\n"
    )
    assert not png.exists()
    assert main(["history", "mlp", "--repo", repo, "--format", "json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)["histories"]
    assert len(only["points"]) == 1


def test_a_baseline_without_timed_rounds_is_left_out_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One baseline recorded from a profile (`baseline update --from PROFILE`: no timed
    # rounds, its step times the profiled steps', 30% slower here) among timed ones made
    # phantom change points (up, then down) on the step time.
    centres: list[float | None] = [100_000.0] * 12
    shas = main_line_repo(tmp_path, centres)
    [profiled] = (tmp_path / "baselines" / "mlp" / "cpu-x86_64").glob(f"{shas[6]}.json")
    record = json.loads(profiled.read_text())
    del record["timing"]
    record["samples"]["step_time_us"] = [130_000.0] * 5
    profiled.write_text(json.dumps(record))
    assert main(["history", "mlp", "--repo", str(tmp_path), "--format", "json"]) == 0
    [history] = json.loads(capsys.readouterr().out)["histories"]
    assert history["change_points"] == []
    assert [p["commit"] for p in history["points"]] == [s for s in shas if s != shas[6]]
    assert history["note"] == (
        "1 baseline(s) without timed rounds left out (recorded from a profile: their step "
        "times are the profiled steps', slower by the profiler's cost)"
    )
