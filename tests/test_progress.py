"""Reading progress: on stderr at a terminal, after a delay, with files and bytes; silent for
JSON and off a terminal. Driven through ``perfgate inspect`` on real profiles."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.ingest import progress

DATA = Path(__file__).parent / "data"
KINETO = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
TORCH_NPU = DATA / "torch_npu" / "ascend-msinsight" / "pytorch_text_level1_rank0_ascend_pt"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def terminal(monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> Terminal:
    """stderr as a terminal, from here on. Called in the test itself: pytest sets its own
    capture again between a fixture's setup and the test."""
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    monkeypatch.setattr(progress, "DELAY_S", delay)  # at once: these reads are quick
    monkeypatch.setattr(progress, "MIN_INTERVAL_S", 0.0)  # and every update drawn
    return screen


@pytest.mark.parametrize("profile", [KINETO, TORCH_NPU], ids=["kineto", "torch_npu"])
def test_a_terminal_sees_the_files_and_bytes_read(
    monkeypatch: pytest.MonkeyPatch, profile: Path
) -> None:
    screen = terminal(monkeypatch)
    assert main(["inspect", str(profile)]) == 0
    shown = screen.getvalue()
    assert f"reading {profile.name}" in shown
    assert "files=" in shown
    assert re.search(r"\d(\.\d+)?[kM]?B ", shown)  # the bytes read


def test_json_output_stays_silent_even_at_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    screen = terminal(monkeypatch)
    assert main(["inspect", str(KINETO), "--format", "json"]) == 0
    assert screen.getvalue() == ""
    json.loads(capsys.readouterr().out)


def test_off_a_terminal_nothing_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    assert main(["inspect", str(KINETO)]) == 0
    assert pipe.getvalue() == ""


def test_a_quick_read_shows_nothing_before_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = terminal(monkeypatch, delay=30.0)
    assert main(["inspect", str(KINETO)]) == 0
    assert screen.getvalue() == ""
