"""Names, paths and notes that profiles and user code write are shown as text: on a terminal,
in a CI log (where GitHub's runner obeys workflow commands), in the Markdown of a job summary
or a pull request comment, and within GitHub's size bounds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from perfgate.action.comment import MAX_BODY, comment_body
from perfgate.cli import main
from perfgate.report import markdown as md
from perfgate.report.format import inert, short_name, terminal_text, visible

HOSTILE = [
    "::error title=pwned::from an operator name",
    "kernel ##[add-mask]secret",
    "red\x1b[31mRED\x1b]8;;https://x\x1b\\link\x07",
    "numbers\u202eturned 123 456",
    "bad\ud800surrogate",
    "aten::__and__ @some-team/reviewers #123 https://evil.example | <b>x</b>",
    "conv\nfwd",
    "conv fwd",
]


def _trace(path: Path, names: list[str], scale: float, device: str = "GPU A") -> Path:
    """A Kineto trace of 12 steps, one kernel of each of ``names`` per step."""
    events: list[dict[str, Any]] = []
    for step in range(12):
        start = 1000 + step * 100_000
        t = start + 10
        for i, name in enumerate(names):
            dur = int(20 * scale) + i
            events.append(
                {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t,
                 "dur": dur, "args": {"device": 0, "stream": 7, "correlation": step * 100 + i}}
            )  # fmt: skip
            t += dur + 2
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}", "pid": 1,
             "tid": 1, "ts": start, "dur": t - start + 50}
        )  # fmt: skip
    document = {"deviceProperties": [{"id": 0, "name": device}], "traceEvents": events}
    path.write_text(json.dumps(document))  # "\ud800" is written as JSON's escape
    return path


def _obeyed(text: str) -> list[str]:
    """What a terminal or GitHub's runner would act on in ``text``: escape and control
    characters, bidirectional overrides, lines the runner reads as workflow commands."""
    found = [
        repr(c) for c in text if c in "\x1b\x07\x08\r\u202e\u2066" or 0xD800 <= ord(c) < 0xE000
    ]
    found += [line for line in text.splitlines() if line.lstrip().startswith("::")]
    found += [line for line in text.splitlines() if "##[" in line]
    return found


def test_visible_and_inert_show_what_a_terminal_or_runner_would_act_on() -> None:
    assert visible("a\x1b[31mb\x07") == "a\\x1b[31mb\\x07"
    assert visible("x\u202ey\u200bz\ufeff") == "x\\u202ey\\u200bz\\ufeff"
    assert visible("a\nb\tc") == "a\\nb\\tc"
    assert visible("a\nb\tc", lines=True) == "a\nb\tc"
    assert visible("bad\ud800") == "bad\\ud800"
    # Real text stays as it is: CJK, emoji joined by zero-width joiners, a no-break space.
    assert visible("卷积 👨\u200d👩\u200d👧 ok") == "卷积 👨\u200d👩\u200d👧 ok"
    assert visible("a\u00a0b") == "a b"
    # GitHub's runner: "::" starting a line (after white space), "##[" anywhere.
    assert inert("  ::error::x\nok ::notice::y\nz ##[add-mask]s") == (
        "  :\u200b:error::x\nok ::notice::y\nz #\u200b#[add-mask]s"
    )
    assert inert("aten::to") == "aten::to"
    assert terminal_text("a\x1b[2J\n::warning::w") == "a\\x1b[2J\n:\u200b:warning::w"
    # Names that read alike do not: a line break shows, an empty or blank name says so.
    assert short_name("conv\nfwd") == "conv\\nfwd" != short_name("conv fwd")
    assert (short_name(""), short_name(" "), short_name("\t")) == ("⟨empty⟩", "⟨blank⟩", "\\t")


def test_inspect_and_compare_show_hostile_names_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # names whole in the tables
    device = "GPU A\n::error title=pwned::from the device name"
    before = _trace(tmp_path / "before.json", HOSTILE, 1, device)
    after = _trace(tmp_path / "after.json", HOSTILE, 3, device)
    elsewhere = _trace(tmp_path / "elsewhere.json", HOSTILE, 1)
    assert main(["inspect", str(before), "--top", "20"]) == 0
    text = capsys.readouterr().out
    assert _obeyed(text) == []
    assert "format:  kineto (GPU A\\n::error title=pwned::from the device name)" in text
    assert "bad\ufffdsurrogate" in text  # a lone surrogate reads as a byte that is no UTF-8
    assert "red\\x1b[31mRED" in text and "numbers\\u202eturned" in text
    assert ":\u200b:error title=pwned::from an operator name" in text
    assert "conv\\nfwd" in text and "conv fwd" in text
    assert main(["compare", str(before), str(after), "--top", "20"]) == 1
    text = capsys.readouterr().out
    assert _obeyed(text) == []
    assert "explained by ::error title=pwned::from an operator name [kernel]" in text
    assert main(["compare", str(before), str(elsewhere)]) == 0  # incomparable
    text = capsys.readouterr().out
    assert _obeyed(text) == []
    assert "device: GPU A ::error title=pwned::from the device name → GPU A" in text
    # JSON keeps every name whole, as the profile wrote it (its escapes are JSON's).
    assert main(["inspect", str(before), "--format", "json"]) == 0
    names = {op["op_type"] for op in json.loads(capsys.readouterr().out)["operators"]}
    assert {"conv\nfwd", "numbers\u202eturned 123 456", "bad\ufffdsurrogate"} <= names


@pytest.mark.parametrize("command", ["inspect", "compare"])
def test_markdown_shows_hostile_names_as_text(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "dir`x @some-team"
    folder.mkdir()
    before = _trace(folder / "before.json", HOSTILE, 1)
    after = _trace(folder / "after.json", HOSTILE, 3)
    sides = [str(before)] if command == "inspect" else [str(before), str(after)]
    main([command, *sides, "--format", "md", "--top", "20"])
    text = capsys.readouterr().out
    assert _obeyed(text) == []
    # No mention, reference, link, emphasis or HTML of the names' making; tables keep their
    # columns (a cell's '|' is escaped).
    assert not re.search(r"@\w|#\d|https?://|www\.|(?<!\\)__|(?<!\\)<b>", text)
    assert "aten::\\_\\_and\\_\\_ @\u200dsome-team/reviewers #\u200d123" in text
    header = next(line for line in text.splitlines() if line.startswith("| op_type"))
    columns = len(re.findall(r"(?<!\\)\|", header))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "kernel" in line]
    assert rows and all(len(re.findall(r"(?<!\\)\|", row)) == columns for row in rows)


def test_a_plugin_run_shows_a_crash_message_as_text(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bench="""
def test_crash(perfgate):
    def step():
        raise ValueError("bad input\\n::error title=pwned::from a test\\x1b[31m ##[add-mask]x")
    perfgate.run(step, steps=2)
"""
    )
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider")
    text = result.stdout.str()
    assert "ValueError: bad input" in text
    # pytest's own traceback and short summary are pytest's (the test's own exception, as
    # it raised it); perfgate's section is text.
    section = text[text.index("= perfgate =") :].split("\n=", 1)[0]
    assert "crash: error: not measured: ValueError: bad input ::error title=pwned" in section
    assert _obeyed(section) == [], section


def _report(sections: int, rows: int) -> str:
    """A report shaped as perfgate writes them: a head naming what failed, then a section
    per benchmark with an operator table inside ``<details>``."""
    head = "### perfgate: ❌ regression\n\n- **b000: step_time regressed**\n"
    body = [
        f"\n#### ❌ `b{i:03}`: regression\n\nbaseline: x\n\n"
        "<details><summary>Operators</summary>\n\n| operator | Δ |\n|---|---|\n"
        + "| aten::mm 卷积 | +1.000 ms |\n" * rows
        + "\n</details>\n"
        for i in range(sections)
    ]
    return head + "".join(body)


def test_a_long_report_is_cut_between_sections_and_says_what_it_left_out() -> None:
    report = _report(300, 40)
    fitted = md.fit_report(report, 20_000, "the whole report is in the job summary")
    assert len(fitted) <= 20_000
    assert fitted.count("<details>") == fitted.count("</details>")
    shown = fitted.count("\n#### ")
    assert 0 < shown < 300
    assert fitted.startswith("### perfgate: ❌ regression\n\n- **b000: step_time regressed**")
    assert fitted.endswith(
        f"\n\n> … {300 - shown} of 300 benchmark sections left out here: the report is too "
        "long; the whole report is in the job summary.\n"
    )
    # Bytes, not characters, where GitHub counts bytes (the job summary): 卷积 is 6 bytes.
    in_bytes = md.fit_report(report, 20_000, "x", md.utf8_size)
    assert md.utf8_size(in_bytes) <= 20_000 and in_bytes.count("\n#### ") < shown
    assert md.fit_report(report, len(report), "x") == report


def test_the_pull_request_comment_keeps_its_footer_and_closes_what_it_opens() -> None:
    body = comment_body("regression", _report(300, 40), "c" * 40, "https://x/runs/1")
    assert len(body) <= MAX_BODY
    assert body.count("<details>") == body.count("</details>")
    assert "benchmark sections left out here" in body
    assert body.rstrip().endswith("this comment is updated in place on every run of this job</sub>")


def test_the_job_summary_stays_within_githubs_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfgate.action import append_summary

    summary = tmp_path / "step_summary.md"
    summary.write_text("x" * (md.JOB_SUMMARY_BYTES - 50_000))  # what earlier steps wrote
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    append_summary(_report(300, 40))
    assert summary.stat().st_size <= md.JOB_SUMMARY_BYTES
    assert "benchmark sections left out here" in summary.read_text()


def test_the_html_report_shows_hostile_names_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A right-to-left override in an operator name turned the rest of the reason paragraph
    # around in the browser ("+0.652 ms/step" read "pets/sm 256.0+").
    source = Path(__file__).parent / "data" / "records" / "host_copy.results.json"
    text = source.read_text().replace('"aten::to"', '"aten::to\\u202e\\u001b[2J"')
    assert "\\u202e" in text
    results = tmp_path / "results.json"
    results.write_text(text)
    main(["report", str(results), "--format", "html", "-o", str(tmp_path / "r.html")])
    page = (tmp_path / "r.html").read_text()
    assert "\u202e" not in page and "\x1b" not in page
    assert "aten::to\\u202e\\x1b[2J" in page
