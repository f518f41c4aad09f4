"""The reader registry: one typed Reader per format family, asked in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import Reader, detect_reader, readers

DATA = Path(__file__).parent / "data"


def test_readers_are_asked_most_specific_layout_first() -> None:
    assert [r.name for r in readers()] == ["torch_npu", "msprof", "ascend_db", "chrome_trace"]


@pytest.mark.parametrize(
    ("path", "reader"),
    [
        ("torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt", "torch_npu"),
        ("torch_npu/ascend-mstt/cluster_analysis_output", "torch_npu"),
        ("msprof/ascend-msprof-skill/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", "msprof"),
        ("ascend_db/pytorch_db_level1_rank0_ascend_pt", "ascend_db"),
        ("ascend_db/msprof_full_db/msprof_0.db", "ascend_db"),
        ("ascend_timeline/trace_view.json", "chrome_trace"),
        # a directory of traces, all but one not named *.pt.trace.json (reading it would
        # refuse two traces of rank 0: they come from different runs)
        ("kineto", "chrome_trace"),
    ],
)
def test_each_real_layout_goes_to_its_reader(path: str, reader: str) -> None:
    found: Reader = detect_reader(DATA / path)
    assert found.name == reader


def test_an_unknown_layout_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ProfileError, match="not a profile layout perfgate knows"):
        detect_reader(tmp_path)
