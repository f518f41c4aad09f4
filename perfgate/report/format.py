"""How perfgate writes numbers, once for every report: times, ratios, changes.

Times are µs inside perfgate and read as ``154.484 ms``, ``50.6 µs`` or ``1.204 s``; ratios
(0..1) read as ``5.74%``; a change reads in its threshold's unit (``+10.4%``, ``+1.25pt``,
``+2.000 ms``); and how names from profiles are shown on a terminal or in a CI log: as text,
never as something the terminal or the CI runner acts on (:func:`visible`,
:func:`terminal_text`).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence

from perfgate.rules import Unit

NOT_AVAILABLE = "n/a"


def missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# Past this many units, a number is written with an exponent: a hand-edited 1e300 in a results
# file read as a 300-digit cell that pushed every table off the screen.
_HUGE = 1e9


def _fixed(value: float, decimals: int, *, signed: bool = False) -> str:
    """``value`` with ``decimals`` places, or in three significant digits with an exponent
    where it is too large to read that way (``+1.23e+12``)."""
    sign = "+" if signed else ""
    if math.isfinite(value) and abs(value) < _HUGE:
        return f"{value:{sign}.{decimals}f}"
    return f"{value:{sign}.3g}"


def format_time(us: float | None) -> str:
    """Microseconds as a readable time: ``154.484 ms``, ``50.6 µs``, ``1.204 s``."""
    if us is None or missing(us):
        return NOT_AVAILABLE
    if abs(us) >= 1e6:
        return f"{_fixed(us / 1e6, 3)} s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} µs"


def format_ms(us: float | None, *, signed: bool = False) -> str:
    """Microseconds as bare milliseconds (``1.250``, ``+0.480``): table cells under an
    "ms" header."""
    if us is None or missing(us):
        return NOT_AVAILABLE
    return _fixed(us / 1e3, 3, signed=signed)


def format_ratio(value: float | None) -> str:
    """A 0..1 ratio as a percentage: ``5.74%``."""
    if value is None or missing(value):
        return NOT_AVAILABLE
    return f"{_fixed(value * 100, 2)}%"


def is_time(metric: str) -> bool:
    """Whether a metric or sample column holds µs (``step_time_us``, ``time_per_step_us``)."""
    return metric.endswith("_us")


def format_value(metric: str, value: float | None) -> str:
    """A metric's value in its own unit: a time for ``*_us`` columns, else a ratio."""
    return format_time(value) if is_time(metric) else format_ratio(value)


def format_change(change: float | None, unit: Unit | str) -> str:
    """A change in a threshold's unit: ``+10.4%`` (relative), ``+1.25pt``, ``+2.000 ms``."""
    if change is None or missing(change):
        return NOT_AVAILABLE
    unit = Unit(unit)
    if unit is Unit.RELATIVE:
        return f"{_fixed(change * 100, 1, signed=True)}%"
    if unit is Unit.POINTS:
        return f"{_fixed(change * 100, 2, signed=True)}pt"
    return f"{_fixed(change / 1e3, 3, signed=True)} ms"


def format_spread(value: float, unit: Unit | str) -> str:
    """A noise or spread (no sign) in a threshold's unit: ``±4.2%``, ``±0.31pt``."""
    return "±" + format_change(abs(value), unit).lstrip("+")


def format_calls(value: float | None) -> str:
    """Calls per step: ``8``, ``2.5``."""
    if value is None or missing(value):
        return NOT_AVAILABLE
    return f"{value:.2f}".rstrip("0").rstrip(".")


def format_p(value: float | None) -> str:
    """A p-value for a table cell: ``0.0016``; one that underflowed to 0 (a copy ratio rising
    from exactly 0 in every baseline round) reads ``<1e-300``, not ``0``."""
    if value is None or missing(value):
        return NOT_AVAILABLE
    return "<1e-300" if value <= 0 else f"{value:.2g}"


def p_clause(value: float | None) -> str:
    """``p=0.0016``, or ``p<1e-300`` where the p-value underflowed."""
    shown = format_p(value)
    return f"p{shown}" if shown.startswith("<") else f"p={shown}"


def _drop_nested(name: str, opening: str, closing: str) -> str:
    """``name`` with every outermost ``opening…closing`` block replaced by ``opening…closing``
    holding an ellipsis (``f<int, 4>(x)`` → ``f<…>(x)``)."""
    out: list[str] = []
    depth = 0
    for char in name:
        if char == opening:
            if depth == 0:
                out.append(opening + "…")
            depth += 1
        elif char == closing and depth:
            depth -= 1
            if depth == 0:
                out.append(closing)
        elif depth == 0:
            out.append(char)
    return "".join(out)


# Invisible characters that are part of real text (joiners in emoji sequences and in Indic
# and Persian words): shown as they are.
_JOINERS = frozenset("\u200c\u200d")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with what a terminal would act on or hide shown as escapes (``\\x1b``,
    ``\\u202e``, ``\\n``): control characters (escape sequences, bell, backspace, carriage
    return; line breaks and tabs too, unless ``lines``), bidirectional overrides and other
    invisible format characters (zero-width spaces, byte order marks), line and paragraph
    separators, and lone surrogates. Operator names, paths and device names come from
    profiles that anyone can write."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable() or char in _JOINERS or (lines and char in "\n\t"):
            out.append(char)
        elif unicodedata.category(char) == "Zs":  # a space of another width: a space
            out.append(" ")
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


# What GitHub's runner reads as a workflow command in a job's log: a line starting with ``::``
# after white space (``::error::…``, ``::add-mask::…``, ``::stop-commands::…``), or holding the
# legacy ``##[`` anywhere in it. A zero-width space keeps such text from being one, unseen.
_ZERO_WIDTH_SPACE = "\u200b"


def inert(text: str) -> str:
    """``text`` with no line that a GitHub Actions runner would take for a workflow command:
    a ``::`` that starts a line (after white space) and every ``##[`` are broken by a
    zero-width space, so that a name like ``::error::…`` or ``##[add-mask]…`` in a table
    stays text in the job's log."""
    if "::" not in text and "##[" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        start = len(line) - len(line.lstrip())
        if line.startswith("::", start):
            line = line[: start + 1] + _ZERO_WIDTH_SPACE + line[start + 1 :]
        lines[i] = line.replace("##[", "#" + _ZERO_WIDTH_SPACE + "#[")
    return "\n".join(lines)


def terminal_text(text: str) -> str:
    """Text for a terminal or a CI log (reports, notes, errors): :func:`visible`, line breaks
    kept, then :func:`inert`."""
    return inert(visible(text, lines=True))


def display_width(text: str) -> int:
    """The terminal columns ``text`` takes: two for a wide (CJK) character, none for a
    combining one, as tabulate counts them when it aligns the columns."""
    from wcwidth import wcswidth

    columns = wcswidth(text)
    return columns if columns >= 0 else len(text)  # a control character: count characters


def _head(text: str, columns: int) -> str:
    """The longest start of ``text`` that takes at most ``columns`` terminal columns."""
    from wcwidth import wcwidth

    taken = 0
    for i, char in enumerate(text):
        taken += max(wcwidth(char), 0)
        if taken > columns:
            return text[:i]
    return text


def _tail(text: str, columns: int) -> str:
    """The longest end of ``text`` that takes at most ``columns`` terminal columns."""
    return _head(text[::-1], columns)[::-1]


def short_name(name: str, width: int = 60) -> str:
    """An operator or kernel name that fits a table cell of ``width`` terminal columns:
    template argument lists and parameter lists folded
    (``void at::native::vectorized_elementwise_kernel<4, …>(int, …)`` →
    ``void at::native::vectorized_elementwise_kernel<…>(…)``), as HTA does, then cut in the
    middle; what a terminal would act on or hide is shown as escapes (:func:`visible`), and an
    empty or blank name says so. JSON keeps the full name."""
    text = _shown_name(name)
    if display_width(text) > width:
        text = _drop_nested(_drop_nested(text, "<", ">"), "(", ")")
    if display_width(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    tail = width - 1 - head
    return _head(text, head) + "…" + _tail(text, tail)


def _shown_name(name: object) -> str:
    """A name on one line: escapes for what a terminal would act on or hide (a line break
    reads ``\\n``, so that ``conv\\nfwd`` and ``conv fwd`` stay apart), runs of spaces as one."""
    text = str(name)
    if not text:
        return "⟨empty⟩"
    shown = " ".join(visible(text).split())
    return shown or "⟨blank⟩"


def short_names(names: Sequence[str], width: int = 60) -> list[str]:
    """:func:`short_name` of each of ``names`` (a table's rows), told apart where two
    different names would read the same: the look-alikes are cut around where they part
    (``…adagrad_unweighted_ker…`` and ``…adagrad_weighted_kerne…`` instead of two
    ``…codegen_r…_cta_per_row_1<…>(…)``), with their template and parameter lists shown
    when only those differ."""
    texts = [_shown_name(name) for name in names]
    shown = [short_name(text, width) for text in texts]
    rows_of: dict[str, list[int]] = {}
    for row, text in enumerate(shown):
        rows_of.setdefault(text, []).append(row)
    for rows in rows_of.values():
        distinct = sorted({texts[row] for row in rows})
        if len(distinct) < 2:
            continue
        folded = [_drop_nested(_drop_nested(t, "<", ">"), "(", ")") for t in distinct]
        # Folded names that still differ are cut around their difference; else the full ones.
        forms = folded if len(set(folded)) == len(distinct) else distinct
        cut = {}
        for text, form in zip(distinct, forms, strict=True):
            parts_at = max(_common_prefix(form, other) for other in forms if other != form)
            cut[text] = _cut_around(form, parts_at, width)
        for row in rows:
            shown[row] = cut[texts[row]]
    return shown


def _common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _cut_around(text: str, at: int, width: int) -> str:
    """``text`` in ``width`` characters with the character at ``at`` kept: its start, the
    part around ``at`` and its end, joined by ellipses where something is left out."""
    if display_width(text) <= width or width < 8:  # too narrow for three parts: one cut
        return short_name(text, width)
    if display_width(text) != len(text):  # wide characters: one middle cut, by columns
        return short_name(text, width)
    head = tail = (width - 2) // 3
    middle = width - 2 - head - tail
    start = at - middle // 3
    if start <= head:  # the difference is near the start: one cut, before the end
        return text[: width - 1 - tail] + "…" + text[-tail:]
    if start + middle >= len(text) - tail:  # near the end: one cut, after the start
        return text[:head] + "…" + text[-(width - 1 - head) :]
    return text[:head] + "…" + text[start : start + middle] + "…" + text[-tail:]


def terminal_width(default: int = 120) -> int:
    """The width tables should fit: ``COLUMNS``, else the terminal's, else ``default``."""
    import os
    import shutil

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((default, 24)).columns


def fitted_table(
    rows: Sequence[Sequence[str]], headers: Sequence[str], *, optional: Sequence[str] = ()
) -> tuple[str, list[str]]:
    """A terminal table (tabulate's ``simple``) of ``rows`` fitted to :func:`terminal_width`:
    where it is wider, the ``optional`` columns (by header) left out, in their order, and
    then its headers of several words put one word a line. Returns the
    table and the headers of the columns left out, so that the caller can say once what
    they held."""
    from tabulate import tabulate

    width = terminal_width()
    kept = list(range(len(headers)))
    droppable = [headers.index(h) for h in optional]
    stacked = False
    while True:
        shown = [headers[i].replace(" ", "\n") if stacked else headers[i] for i in kept]
        # No number parsing: a commit like 1234e567 is text, not 1.234e+570.
        text = tabulate(
            [[row[i] for i in kept] for row in rows], headers=shown, disable_numparse=True
        )
        if max(map(display_width, text.splitlines()), default=0) <= width:
            break
        if droppable:
            kept.remove(droppable.pop(0))
        elif not stacked:
            stacked = True
        else:
            break
    return text, [headers[i] for i in range(len(headers)) if i not in kept]


MARKDOWN_NAME_WIDTH = 60  # a PR comment's table scrolls: names as long as this are read whole
MIN_NAME_WIDTH = 24


def named_table(
    names: Sequence[str],
    cells: Sequence[Sequence[str]],
    headers: Sequence[str],
    *,
    optional: Sequence[str] = (),
    right: Sequence[str] = (),
) -> str:
    """A terminal table (tabulate's ``simple``) whose first column is ``names`` (operator
    names, shortened by :func:`short_names`) and whose other columns are ``cells``, fitted
    to :func:`terminal_width`: the names get the room the other columns leave, at least
    :data:`MIN_NAME_WIDTH` characters, and where even that does not fit, the ``optional``
    columns (by header) are left out, in their order. ``headers`` may span two lines; the
    columns named in ``right`` are right-aligned (numbers)."""
    from tabulate import tabulate

    width = terminal_width()
    kept = list(range(1, len(headers)))
    droppable = [headers.index(h) for h in optional]
    align = ["right" if h in right else "left" for h in headers]
    while True:
        others = tabulate(
            [[row[i - 1] for i in kept] for row in cells],
            headers=[headers[i] for i in kept],
            tablefmt="simple",
            disable_numparse=True,
            colalign=[align[i] for i in kept],
        )
        room = width - 2 - max(map(display_width, others.splitlines()), default=0)
        if room >= MIN_NAME_WIDTH or not droppable:
            break
        kept.remove(droppable.pop(0))
    shown = short_names(names, max(MIN_NAME_WIDTH, room))
    return tabulate(
        [[name, *(row[i - 1] for i in kept)] for name, row in zip(shown, cells, strict=True)],
        headers=[headers[0], *(headers[i] for i in kept)],
        tablefmt="simple",
        disable_numparse=True,
        colalign=[align[0], *(align[i] for i in kept)],
    )


def format_share(share: float | None) -> str:
    """An operator's share of the step-time change, for a table cell: never more than the
    whole (``>100%``: it moved more than the step did, the rest of the step the other way),
    and ``opposite`` when it moved against the step's change."""
    if share is None or math.isnan(share):
        return "—"
    if share < 0:
        return "opposite"
    if share > 1:
        return ">100%"
    return f"{share:.0%}"
