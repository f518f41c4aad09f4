"""Render one analysed profile: terminal table, Markdown, and the versioned JSON document.

The JSON document is a public contract (``docs/json.md``): scripts read
``metrics.<name>.median`` and ``operators[].time_per_step_us``. Bump
:data:`INSPECT_SCHEMA_VERSION` on any incompatible change.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _encode_string
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate

from perfgate.analysis.advisor import Hint
from perfgate.analysis.metrics import METRIC_NAMES, RATIO_METRICS, RunAnalysis
from perfgate.model import BREAKDOWN_COLUMNS, Profile
from perfgate.records import json_number
from perfgate.report import markdown as md
from perfgate.report.advice import advice_block, advice_dict, advice_lines
from perfgate.report.format import (
    MARKDOWN_NAME_WIDTH,
    format_calls,
    format_ratio,
    format_time,
    named_table,
    short_names,
    visible,
)

_orjson_dumps: Callable[[Any], bytes] | None
try:  # the fast extra
    from orjson import dumps as _orjson_dumps
except ImportError:  # pragma: no cover - a test hides it instead
    _orjson_dumps = None

# History: 1 — first version (metrics, breakdown, per_step, operators, profile, notes).
INSPECT_SCHEMA = "perfgate.inspect"
INSPECT_SCHEMA_VERSION = 1

_BREAKDOWN_LABELS = {
    "computing_us": "computing",
    "comm_not_overlapped_us": "communication (not overlapped)",
    "free_us": "free",
    "preparing_us": "preparing",
}


def inspect_document(
    profile: Profile, analysis: RunAnalysis, top: int | None = None, hints: Sequence[Hint] = ()
) -> dict[str, Any]:
    """The ``perfgate inspect --format json`` document (``hints``: the advisor's)."""
    return _document(profile, analysis, top, hints, table=_records)


def _document(
    profile: Profile,
    analysis: RunAnalysis,
    top: int | None,
    hints: Sequence[Hint],
    table: Callable[[pd.DataFrame], Any],
) -> dict[str, Any]:
    """:func:`inspect_document`, its tables (lists of rows) made by ``table``."""
    operators = analysis.operators if top is None else analysis.operators.head(top)
    metadata = {
        k: json_number(v) if isinstance(v, float) else v
        for k, v in profile.metadata.items()
        if isinstance(v, (str, int, float, bool, list))
    }
    return {
        "schema": INSPECT_SCHEMA,
        "schema_version": INSPECT_SCHEMA_VERSION,
        "profile": {"path": profile.path, "format": profile.source, "metadata": metadata},
        "steps": {
            "analysed": len(analysis.per_step),
            "ranks": sorted(int(r) for r in analysis.per_rank["rank"].unique()),
            "ids": [int(s) for s in analysis.per_step["step"]],
        },
        "metrics": {name: _statistics(analysis.summary[name]) for name in METRIC_NAMES},
        "breakdown": {
            name: _statistics(analysis.summary[name]) for name in (*BREAKDOWN_COLUMNS, "copy_us")
        },
        "per_step": table(
            analysis.per_step.drop(columns=["start_us", "end_us"]).astype({"step": "int64"})
        ),
        "operators": table(operators),
        "operators_total": len(analysis.operators),
        "advice": [advice_dict(h) for h in hints],
        "notes": analysis.notes,
    }


def _statistics(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A metric's statistics for JSON: NaN as null, the count ``n`` a whole number."""
    return {k: int(v) if k == "n" else json_number(v) for k, v in summary.items()}


def inspect_json(
    profile: Profile, analysis: RunAnalysis, top: int | None = None, hints: Sequence[Hint] = ()
) -> str:
    """The text of ``perfgate inspect --format json``: exactly
    ``json.dumps(inspect_document(...), indent=2) + "\n"``, written faster (see
    :func:`dumps_indented`)."""
    # The tables stay columns (_Columns) up to the writer: no dict per row made and undone.
    return dumps_indented(_document(profile, analysis, top, hints, table=_Columns.of)) + "\n"


_INDENT = "  "


def dumps_indented(document: dict[str, Any]) -> str:
    """``json.dumps(document, indent=2)``, the same text, for a document holding long lists of
    flat rows (``per_step``: one object per step) or of numbers (``steps.ids``). A
    :class:`_Columns` value is written as the list of its rows.

    Python's JSON encoder writes indented text in pure Python, one value at a time. Here each
    top-level list of flat objects that share their keys is written column by column: the
    values of a column are encoded in one call of an encoder, then the lines are joined; so is
    each list of scalars one level down. Everything else goes through :func:`json.dumps`.
    """
    tables: dict[str, str] = {}

    def placeholder(path: str, rendered: str) -> str:
        tables[path] = rendered
        return f"\x00perfgate table {path}\x00"

    skeleton: dict[str, Any] = {}
    for key, value in document.items():
        rendered = None
        if isinstance(value, _Columns):
            rendered = _columns_text(value.keys, value.columns, level=1)
            value = value if rendered is not None else value.records()
        elif isinstance(value, list):
            rendered = _rows_text(value, level=1)
        elif isinstance(value, dict):
            value = {
                name: placeholder(f"{key}/{name}", listed) if listed is not None else item
                for name, item in value.items()
                for listed in [_scalars_text(item, level=2)]
            }
        skeleton[key] = value if rendered is None else placeholder(key, rendered)
    text = json.dumps(skeleton, indent=2, allow_nan=False, default=_plain)
    for path, rendered in tables.items():
        marker = json.dumps(f"\x00perfgate table {path}\x00")
        if text.count(marker) != 1:  # cannot happen with NUL bytes in it; never guess
            return json.dumps(document, indent=2, allow_nan=False, default=_plain)
        text = text.replace(marker, rendered)
    return text


@dataclass(frozen=True)
class _Columns:
    """A table of the document (a list of flat rows) kept as its columns, for
    :func:`dumps_indented`, which writes it column by column."""

    keys: list[str]
    columns: list[list[Any]]

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _Columns:
        """:func:`_records` of ``frame``, as columns."""
        columns = [_column_values(frame.iloc[:, i]) for i in range(frame.shape[1])]
        return cls([str(name) for name in frame.columns], columns)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.keys, row)) for row in zip(*self.columns)]


def _plain(value: Any) -> Any:
    """``json.dumps``' ``default``: a :class:`_Columns` as its rows; anything else refused."""
    if isinstance(value, _Columns):
        return value.records()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _rows_text(rows: list[Any], level: int) -> str | None:
    """The indented JSON of a non-empty list of flat objects with the same keys, or ``None``
    when the list is anything else."""
    if not rows or not all(type(row) is dict for row in rows):
        return None
    keys = list(rows[0])
    if any(list(row) != keys for row in rows):
        return None
    return _columns_text(keys, list(zip(*(row.values() for row in rows))), level)


def _columns_text(keys: list[Any], columns: Sequence[Sequence[Any]], level: int) -> str | None:
    """The indented JSON of the rows whose columns are ``columns``: ``"[]"`` for no rows,
    ``None`` where a key is no string or a column holds other than numbers or strings."""
    if not keys or not all(isinstance(k, str) for k in keys):
        return None
    if not columns or not len(columns[0]):
        return "[]"
    inner = "\n" + _INDENT * (level + 2)
    texts = []
    for column in columns:
        values = _values_text(tuple(column))
        if values is None:
            return None
        texts.append(values)
    # One template per row ("%" in a key doubled): a format per object, not a join per value.
    fields = ",".join((inner + json.dumps(k) + ": ").replace("%", "%%") + "%s" for k in keys)
    template = "{" + fields + "\n" + _INDENT * (level + 1) + "}"
    return _list_text([template % values for values in zip(*texts)], level)


def _scalars_text(value: Any, level: int) -> str | None:
    """The indented JSON of a list of two or more numbers or strings at ``level``, or None."""
    if type(value) is not list or len(value) < 2:
        return None
    values = _values_text(tuple(value))
    return None if values is None else _list_text(values, level)


def _list_text(items: list[str], level: int) -> str:
    """The JSON list of the non-empty ``items`` (their text), one per line, at ``level``."""
    item = "\n" + _INDENT * (level + 1)
    return "[" + item + ("," + item).join(items) + "\n" + _INDENT * level + "]"


def _values_text(column: tuple[Any, ...]) -> list[str] | None:
    """The JSON text of each value (as :func:`json.dumps` writes it), for numbers, booleans,
    ``None`` and strings; ``None`` for a column holding anything else."""
    kinds = set(map(type, column))
    if kinds <= _NUMBER_TYPES:
        fast = _numbers_text_fast(column)
        if fast is not None:
            return fast
        # One call of the C encoder; numbers, true/false/null hold no ", ". Strict JSON:
        # a NaN or an infinity here is a bug, never "NaN" in the output.
        return json.dumps(list(column), allow_nan=False)[1:-1].split(", ")
    if kinds <= _STRING_TYPES:
        return ["null" if v is None else _encode_string(v) for v in column]
    return None


_NUMBER_TYPES = frozenset({int, float, bool, type(None)})
_STRING_TYPES = frozenset({str, type(None)})
# Both json.dumps and orjson write the shortest digits that read back as the same float, in
# the same form from 1e-4 up; below, json writes ``5e-05`` and ``1.5e-09`` where orjson writes
# ``0.00005`` and ``1.5e-9``. A column whose text holds an "e" (an exponent, or true/false
# beside floats) or "0.0000" is left to json.
_MAYBE_OTHER_FORM = ("e", "0.0000")


def _numbers_text_fast(column: tuple[Any, ...]) -> list[str] | None:
    """:func:`_values_text` of a column of numbers, written by orjson (the ``fast`` extra; 20
    times quicker at floats than the C encoder of :mod:`json`), or None where it is not
    installed or its text could differ from json.dumps' own: a number written with an
    exponent or below 1e-4, an integer beyond 64 bits, a NaN or an infinity (orjson writes
    them ``null``; json refuses them, as this writer must)."""
    if _orjson_dumps is None:
        return None
    try:
        text = _orjson_dumps(list(column)).decode()[1:-1]
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits
        return None
    if text.count("null") != column.count(None) or any(f in text for f in _MAYBE_OTHER_FORM):
        return None
    return text.split(",") if column else []


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """``frame.to_dict("records")`` with NaN and infinities as ``None`` (JSON has neither),
    built column by column: each column becomes a list of Python values at once, then the rows
    are zipped."""
    return _Columns.of(frame).records()


def _column_values(column: pd.Series) -> list[Any]:
    """A column's values as Python objects, as ``to_dict("records")`` gives them, floats
    through :func:`~perfgate.records.json_number` (NaN and infinities as ``None``)."""
    if column.dtype.kind == "f":
        values = column.to_numpy(dtype=np.float64)
        out = values.astype(object)  # Python floats
        out[~np.isfinite(values)] = None
        return list(out)
    if column.dtype.kind in "iub":
        return column.to_numpy().tolist()  # Python ints / bools
    # Anything else (strings, objects): as pandas boxes them, float NaN as None.
    return [
        json_number(v) if isinstance(v, float) else v
        for v in column.astype(object).to_numpy().tolist()
    ]


def _format_metric(name: str, value: float) -> str:
    return format_ratio(value) if name in RATIO_METRICS else format_time(value)


def _header_lines(profile: Profile, analysis: RunAnalysis) -> list[str]:
    meta = profile.metadata
    # The profile's own text, on one line (a device name can hold anything).
    details = [
        visible(str(meta[key]))
        for key in ("profiler_level", "aic_metrics", "device")
        if meta.get(key) not in (None, "")
    ]
    versions = [
        f"{label} {visible(str(meta[key]))}"
        for key, label in (
            ("cann_version", "CANN"),
            ("torch_npu_version", "torch_npu"),
            ("torch_version", "torch"),
        )
        if meta.get(key)
    ]
    fmt = profile.source + (f" ({', '.join(details)})" if details else "")
    ranks = sorted(int(r) for r in analysis.per_rank["rank"].unique())
    step_time = analysis.summary["step_time_us"]
    lines = [
        f"profile: {profile.path}",
        f"format:  {fmt}" + (f"; {', '.join(versions)}" if versions else ""),
        f"ranks:   {len(ranks)} {ranks if len(ranks) > 1 else ''}".rstrip()
        + f" · steps analysed: {len(analysis.per_step)}"
        + (" · tasks are top-level CPU ops" if meta.get("task_basis") == "cpu" else ""),
        f"step time: median {format_time(step_time['median'])} "
        f"(min {format_time(step_time['min'])}, max {format_time(step_time['max'])}, "
        f"n={step_time['n']})",
    ]
    return lines


def _metric_rows(analysis: RunAnalysis) -> list[list[str]]:
    rows = []
    for name in METRIC_NAMES:
        stats = analysis.summary[name]
        cells = [_format_metric(name, stats[k]) for k in ("median", "mean", "min", "max")]
        rows.append([name, *cells, str(stats["n"])])
    return rows


def _breakdown_rows(analysis: RunAnalysis) -> list[list[str]]:
    step = analysis.summary["step_time_us"]["median"]
    rows = []
    for column, label in _BREAKDOWN_LABELS.items():
        median = analysis.summary[column]["median"]
        share = median / step if step and not math.isnan(step) else float("nan")
        rows.append([label, format_time(median), format_ratio(share)])
    copy = analysis.summary["copy_us"]["median"]
    rows.append(
        [
            "copy (overlaps the above)",
            format_time(copy),
            format_ratio(copy / step) if step and not math.isnan(step) else "n/a",
        ]
    )
    return rows


def _operator_cells(analysis: RunAnalysis, top: int) -> tuple[list[str], list[list[str]]]:
    """The names (in full) and the other cells of the top operators."""
    top_rows = analysis.operators.head(top).to_dict("records")
    cells = [
        [
            row["core"],
            row["category"],
            format_calls(row["calls_per_step"]),
            format_time(row["time_per_step_us"]),
            format_ratio(row["share"]),
        ]
        for row in top_rows
    ]
    return [row["op_type"] for row in top_rows], cells


_METRIC_HEADERS = ["metric", "median", "mean", "min", "max", "n"]
_BREAKDOWN_HEADERS = ["breakdown (median)", "time", "of step"]
_OPERATOR_HEADERS = ["op_type", "core", "category", "calls/step", "time/step", "share"]


def render_table(
    profile: Profile, analysis: RunAnalysis, top: int = 10, hints: Sequence[Hint] = ()
) -> str:
    """The terminal report of ``perfgate inspect`` (``hints``: the advisor's)."""
    parts = ["\n".join(_header_lines(profile, analysis)), ""]
    parts.append(
        tabulate(
            _metric_rows(analysis),
            headers=_METRIC_HEADERS,
            tablefmt="simple",
            colalign=("left",) + ("right",) * 5,
        )
    )
    parts.append("")
    parts.append(
        tabulate(
            _breakdown_rows(analysis),
            headers=_BREAKDOWN_HEADERS,
            tablefmt="simple",
            colalign=("left", "right", "right"),
        )
    )
    parts.append("")
    total = len(analysis.operators)
    if total:
        parts.append(f"top operators ({min(top, total)} of {total}, by device time per step)")
        names, cells = _operator_cells(analysis, top)
        parts.append(
            named_table(
                names,
                cells,
                _OPERATOR_HEADERS,
                optional=("category",),
                right=("calls/step", "time/step", "share"),
            )
        )
    else:
        parts.append("operators: none in this profile")
    if hints:
        parts.append("")
        parts.append(f"advisor ({len(hints)} hint(s), largest impact first)")
        parts.extend(advice_block(hints))
    if analysis.notes:
        parts.append("")
        parts.extend(f"note: {line}" for line in analysis.notes)
    return "\n".join(parts) + "\n"


def render_markdown(
    profile: Profile, analysis: RunAnalysis, top: int = 10, hints: Sequence[Hint] = ()
) -> str:
    """Markdown for a GitHub job summary or a PR comment (``hints``: the advisor's)."""
    header = _header_lines(profile, analysis)
    parts = [f"### perfgate inspect: {md.code(profile.path)}", ""]
    parts.extend(f"- {md.escape(line)}" for line in header[1:])
    parts.append("")
    parts.append(tabulate(_metric_rows(analysis), headers=_METRIC_HEADERS, tablefmt="github"))
    parts.append("")
    parts.append(tabulate(_breakdown_rows(analysis), headers=_BREAKDOWN_HEADERS, tablefmt="github"))
    parts.append("")
    if len(analysis.operators):
        parts.append(
            f"**Top operators** ({min(top, len(analysis.operators))} of "
            f"{len(analysis.operators)}, by device time per step)"
        )
        parts.append("")
        names, cells = _operator_cells(analysis, top)
        shown = short_names(names, MARKDOWN_NAME_WIDTH)
        parts.append(
            tabulate(
                [[md.escape(name), *row] for name, row in zip(shown, cells, strict=True)],
                headers=_OPERATOR_HEADERS,
                tablefmt="github",
            )
        )
    if hints:
        parts.append("")
        parts.append(f"**Advisor** ({len(hints)} hint(s), largest impact first)")
        parts.append("")
        parts.extend(f"- {md.escape(line)}" for line in advice_lines(hints))
    if analysis.notes:
        parts.append("")
        parts.extend(f"> {md.escape(line)}  " for line in analysis.notes)
    return "\n".join(parts) + "\n"
