"""Text from profiles and results files, made safe to put into Markdown.

Operator names, benchmark names and notes reach the job summary and the pull request
comment. There, ``|`` would break a table, a backtick would end a code span, ``<img …>`` would
be HTML, ``[text](url)`` a link and ``@org/team`` a notification to a whole team. These
helpers make such text show as written, and nothing more.
"""

from __future__ import annotations

import re

# Markdown's punctuation that can start markup, and '&' (an entity such as &#64; is an '@').
_SPECIAL = re.compile(r"([\\`*\[\]<>|~&])")
# GitHub links @user and @org/team mentions; a zero-width joiner after '@' stops that and
# shows nothing.
_MENTION = re.compile(r"@(?=\w)")
ZERO_WIDTH_JOINER = "\u200d"


def escape(text: object) -> str:
    """``text`` as literal Markdown inline text, on one line (safe in a table cell)."""
    flat = " ".join(str(text).splitlines())
    return _MENTION.sub("@" + ZERO_WIDTH_JOINER, _SPECIAL.sub(r"\\\1", flat))


def code(text: object) -> str:
    """``text`` as a code span, when it can be one (no backtick, ``|`` or line break; a
    safe benchmark or env name always can); else as :func:`escape`'d text."""
    value = str(text)
    if not value or any(c in value for c in "`|\r\n"):
        return escape(value)
    return f"`{value}`"
