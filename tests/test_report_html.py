"""The HTML report, from real runs: a baseline recorded by `pytest --perfgate --perfgate-update`,
then a run 30× heavier written with `--perfgate-html`; checked as HTML, through
`perfgate report --format html`, and in a real headless Chromium (charts present and sized,
no console errors, the operator table sorts). The browser test is skipped where no Chromium
is installed (.ci/run installs Debian's ``chromium``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from chromium import Chromium, find_chromium
from conftest import GitRepo

from perfgate.cli import main

pytest.importorskip("torch")

BENCHMARK = """
import os
import time

import torch

def test_matmul(perfgate):
    work = int(os.environ.get("WORK", "1"))
    a = torch.randn(128, 128)

    def step():
        for _ in range(4 * work):
            torch.mm(a, a)

    perfgate.run(step, steps=8, warmup=1)

def test_tanh(perfgate):
    x = torch.randn(256, 256)

    def step():
        torch.tanh(x).sum()
        time.sleep(0.002)  # the host holds the step: an idle gap the advisor names

    perfgate.run(step, steps=8, warmup=1)
"""


def _pytest(cwd: Path, *args: str, work: str = "1") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORK": work}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose benchmark `matmul` regressed 30×, and `tanh` did not: the folder
    with its results.json and report.html."""
    path = tmp_path_factory.mktemp("html-project")
    (path / "test_bench.py").write_text(BENCHMARK)
    (path / "tox.ini").write_text("[pytest]\n")
    (path / "perfgate.yaml").write_text(
        "thresholds:\n  step_time: {max_increase: 60%}\n  utilization: {max_drop: 50pt}\n"
        "  copy_ratio: {max_increase: 50pt}\n"
        "statistics: {rounds: 4, max_rounds: 4, processes: 1}\n"
    )
    (path / ".gitignore").write_text("perfgate-out/\n__pycache__/\n*.html\n")
    repo = GitRepo(path)
    repo.commit("benchmarks")
    recorded = _pytest(path, "--perfgate", "--perfgate-update")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    repo.commit("perfgate: baselines")
    heavier = _pytest(path, "--perfgate", "--perfgate-html=report.html", work="30")
    assert heavier.returncode == 1, heavier.stdout + heavier.stderr
    assert f"html:    {path / 'report.html'}" in heavier.stdout
    return path


class _Page(HTMLParser):
    """What the checks need of the page: sections, figures, table rows, list items, and
    every reference to something outside the file."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict[str, object]] = {}
        self.external: list[str] = []
        self._section: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("src", "href"):
            target = values.get(key)
            if target and not target.startswith("#"):
                self.external.append(target)
        if tag == "link":
            self.external.append(str(values))
        if tag == "section" and values.get("data-benchmark"):
            self._section = str(values["data-benchmark"])
            self.sections[self._section] = {"verdict": values["data-verdict"], "charts": []}
        elif tag == "figure" and self._section:
            charts = self.sections[self._section]["charts"]
            assert isinstance(charts, list)
            charts.append(values.get("data-chart"))
        elif tag == "li" and self._section and values.get("data-rule"):
            self.sections[self._section].setdefault("advice", [])
            advice = self.sections[self._section]["advice"]
            assert isinstance(advice, list)
            advice.append(values["data-rule"])


def _parsed(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


def test_the_page_has_each_benchmark_with_its_charts_and_is_self_contained(report: Path) -> None:
    page = (report / "report.html").read_text()
    parsed = _parsed(page)
    assert parsed.external == []  # no CDN, no stylesheet or script from elsewhere
    assert set(parsed.sections) == {"matmul", "tanh"}
    matmul = parsed.sections["matmul"]
    assert matmul["verdict"] == "regression"
    assert matmul["charts"] == ["distribution", "breakdown", "timeline"]
    assert parsed.sections["tanh"]["charts"] == ["distribution", "breakdown", "timeline"]
    # The failing metric with its reason, the operator that explains it, the fingerprint.
    assert re.search(r"matmul: step_time regressed: [\d.]+ µs → [\d.]+ ms \(\+\d+\.\d%", page)
    assert re.search(r"<td title=\"aten::mm\">aten::mm</td><td>cpu</td>", page)
    assert "4 → 120" in page  # calls per step of aten::mm: 4 × WORK
    assert "<td>torch_version</td>" in page
    # 4 rounds of the baseline, 4 of the current run: one box each.
    assert "4 baseline round(s), 4 current round(s)" in page
    results = json.loads((report / "perfgate-out" / "results.json").read_text())
    matmul_run = next(r for r in results["runs"] if r["benchmark"] == "matmul")
    assert len(matmul_run["comparison"]["baseline_summary"]["rounds"]) == 4
    assert matmul_run["timeline"]["lanes"]["compute"]
    assert matmul.get("advice", []) == [a["rule"] for a in matmul_run["advice"]]
    # The sleeping step: the device (here the CPU ops) idles most of the step.
    tanh = parsed.sections["tanh"]
    advice_of_tanh = tanh.get("advice", [])
    assert isinstance(advice_of_tanh, list)
    assert advice_of_tanh[:1] == ["idle_gaps"]
    assert re.search(r"<strong>idle gaps</strong>: the device is idle \d+\.\d+% of the step", page)


def test_perfgate_report_renders_the_same_page(report: Path, tmp_path: Path) -> None:
    target = tmp_path / "again.html"
    results = str(report / "perfgate-out" / "results.json")
    assert main(["report", results, "--format", "html", "-o", str(target)]) == 1  # regression
    again = _parsed(target.read_text())
    assert {name: s["charts"] for name, s in again.sections.items()} == {
        "matmul": ["distribution", "breakdown", "timeline"],
        "tanh": ["distribution", "breakdown", "timeline"],
    }


CHROMIUM = find_chromium()


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on PATH (apt-get install chromium; .ci/run installs it): the HTML "
    "report is checked in a real browser only where one is installed",
)
def test_the_page_in_a_real_browser(report: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    with Chromium(CHROMIUM, width=1200, height=900) as browser:
        browser.open(report / "report.html")
        charts = browser.evaluate(
            """Array.from(document.querySelectorAll("figure.chart")).map(f => {
                 const svg = f.querySelector("svg");
                 const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
                 return {benchmark: f.closest("section").dataset.benchmark,
                         chart: f.dataset.chart, width: box.width, height: box.height,
                         shapes: svg ? svg.querySelectorAll("path, rect, line").length : 0};
               })"""
        )
        assert [(c["benchmark"], c["chart"]) for c in charts] == [
            ("matmul", "distribution"),
            ("matmul", "breakdown"),
            ("matmul", "timeline"),
            ("tanh", "distribution"),
            ("tanh", "breakdown"),
            ("tanh", "timeline"),
        ]
        for chart in charts:  # laid out at the page's width, drawn, not collapsed
            assert chart["width"] > 800 and chart["height"] > 100, chart
            assert chart["shapes"] > 10, chart
        # Sorting the operator table by Δ ms/step puts the largest growth first.
        order = browser.evaluate(
            """(() => {
                 const section = document.querySelector("section[data-benchmark=matmul]");
                 const table = section.querySelector("table.sortable");
                 const header = Array.from(table.tHead.rows[0].cells)
                   .find(th => th.textContent.startsWith("Δ"));
                 header.click(); header.click();
                 return [header.getAttribute("aria-sort"),
                         Array.from(table.tBodies[0].rows).map(r => r.cells[0].textContent)];
               })()"""
        )
        assert order[0] == "descending"
        assert order[1][0] == "aten::mm"
        screenshot = browser.screenshot(tmp_path / "report.png")
        errors = [m for m in browser.console if m["level"] in ("error", "warning", "assert")]
        assert errors == []
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("PERFGATE_SCREENSHOT_DIR")
    if keep:  # for a person to look at
        shutil.copy(screenshot, Path(keep) / "report.png")
