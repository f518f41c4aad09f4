"""Text from profiles and results files, made safe to put into Markdown.

Operator names, benchmark names and notes reach the job summary and the pull request
comment. There, ``|`` would break a table, a backtick would end a code span, ``<img …>`` would
be HTML, ``[text](url)`` a link, ``__and__`` bold, ``@org/team`` a notification to a whole
team, ``#123`` a link to an issue, ``https://…`` a link, and a right-to-left override would
turn the numbers after it around. These helpers make such text show as written, and nothing
more.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from perfgate.report.format import visible

# Markdown's punctuation that can start markup, '&' (an entity such as &#64; is an '@'),
# and an '_' that is not inside a word (``aten::__and__`` would be bold; ``step_time`` is not
# emphasis, and stays as it reads in the source).
_SPECIAL = re.compile(r"([\\`*\[\]<>|~&]|(?<![^\W_])_|_(?![^\W_]))")
ZERO_WIDTH_JOINER = "\u200d"
# What GitHub links by itself: @user and @org/team mentions, #123 and owner/repo#123
# references, and bare web addresses. A zero-width joiner inside each stops that and shows
# nothing.
_AUTOLINKED = re.compile(r"(?<=@)(?=\w)|(?<=#)(?=\d)|(?<=www)(?=\.)|(?=://)", re.IGNORECASE)


def escape(text: object) -> str:
    """``text`` as literal Markdown inline text, on one line (safe in a table cell): what a
    terminal would act on or hide shown as escapes (:func:`~perfgate.report.format.visible`)."""
    flat = visible(" ".join(str(text).splitlines()))
    return _AUTOLINKED.sub(ZERO_WIDTH_JOINER, _SPECIAL.sub(r"\\\1", flat))


def code(text: object) -> str:
    """``text`` as a code span, when it can be one (no backtick, ``|``, line break or other
    character :func:`~perfgate.report.format.visible` escapes; a safe benchmark or env name
    always can); else as :func:`escape`'d text."""
    value = str(text)
    if not value or any(c in value for c in "`|") or visible(value) != value:
        return escape(value)
    return f"`{value}`"


# GitHub's bounds: a comment's body holds 65,536 characters; a step's job summary 1 MiB
# ("$GITHUB_STEP_SUMMARY upload aborted": over it, the whole summary is lost).
JOB_SUMMARY_BYTES = 1024 * 1024
_SECTION = "\n#### "  # each benchmark's section of perfgate's reports starts so


def fit_report(report: str, budget: int, whole_at: str, size: Callable[[str], int] = len) -> str:
    """``report`` (perfgate's Markdown: a head that names what failed, then one ``#### ``
    section per benchmark) within ``budget`` as ``size`` counts (characters, or UTF-8 bytes),
    cut only between sections, so that no table row or ``<details>`` is left open, and ending
    with a line that says how many sections were left out and ``whole_at`` (where the whole
    report is). The head is cut between its lines when even it does not fit."""
    if size(report) <= budget:
        return report
    head, *rest = report.split(_SECTION)
    sections = [_SECTION + section for section in rest]

    def ending(left_out: int) -> str:
        what = f"{left_out} of {len(sections)} benchmark sections" if sections else "the rest"
        return f"\n\n> … {what} left out here: the report is too long; {whole_at}.\n"

    # Sizes add up (characters, or UTF-8 bytes): each part is measured once.
    kept = head.rstrip("\n")
    if size(kept) + size(ending(len(sections))) > budget:  # a head of thousands of lines
        lines, used = [], 0
        for line in kept.split("\n"):
            if used + size(line) + 1 + size(ending(len(sections))) > budget:
                break
            lines.append(line)
            used += size(line) + 1
        return "\n".join(lines) + ending(len(sections))
    parts, used = [kept], size(kept)
    for section in sections:
        part = section.rstrip("\n")
        if used + size(part) + size(ending(len(sections) - len(parts))) > budget:
            break
        parts.append(part)
        used += size(part)
    return "".join(parts) + ending(len(sections) - (len(parts) - 1))


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def job_summary_part(path: str, markdown: str, whole_at: str) -> str:
    """``markdown`` fitted (:func:`fit_report`) to what the job summary file at ``path``
    has room for: GitHub drops a step's whole summary past :data:`JOB_SUMMARY_BYTES`."""
    import os

    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0  # not there yet (appending creates it), or not a file: the append says
    room = JOB_SUMMARY_BYTES - used - 1024  # a margin for what other steps' tools add
    return fit_report(markdown, max(room, 0), whole_at, utf8_size)
