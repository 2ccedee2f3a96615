"""Names from files and hosts (host, GPU and NIC names, labels, warnings, messages), made safe for
each output they reach: one function per output kind. A results file is anyone's to write, and a
host's name is its administrator's: neither may add rows to a table, run a formula in a
spreadsheet, break an XML parser, colour or clear a terminal, or be read as markup or math text.

Every function first shows the characters no output should carry raw (`visible`): C0 and C1
control characters (ESC starts a terminal's escape sequences; a newline starts a table row), DEL,
the line and paragraph separators, the bidirectional overrides that reorder what a reader sees, lone
surrogates (no UTF-8 writer can encode them) and the two noncharacters XML forbids; each as its
Python escape (`\\x1b`, `\\n`, `\\u202e`).
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable

_UNSAFE = "\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
_HIDDEN = re.compile(f"[{_UNSAFE}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Cells a spreadsheet reads as a formula (OWASP's CSV injection list: tab and CR are shown by `visible`).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_CHARS = "=+-@"
# Markdown: a backslash escapes, a pipe ends a table cell, < opens HTML, & opens an entity.
_MARKDOWN = re.compile(f"[{_UNSAFE}\\\\|<&]")
_MARKDOWN_CHARS = {"\\": "\\\\", "|": "\\|", "<": "&lt;", "&": "&amp;"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """Terminal text: every character of _UNSAFE written as its escape, newlines included (a name
    stays on its line); everything else as it is."""
    if _HIDDEN.search(text) is None:
        return text
    return _HIDDEN.sub(_shown, text)


def visible_lines(text: str) -> str:
    """Text we composed of lines: `visible` on each line, the newlines between them kept."""
    if _HIDDEN.search(text) is None:
        return text
    return "\n".join(map(visible, text.split("\n")))


def markdown(text: str) -> str:
    """A Markdown table cell or inline text: `visible`, and \\ | < & escaped."""
    if _MARKDOWN.search(text) is None:
        return text
    return "".join(_MARKDOWN_CHARS.get(char, char) for char in visible(text))


def csv_cell(text: str) -> str:
    """A CSV cell: `visible`, and a cell a spreadsheet would read as a formula prefixed with ' (OWASP)."""
    if _HIDDEN.search(text) is None and text[:1] not in _FORMULA_CHARS:  # the usual cell ("" goes on)
        return text
    text = visible(text)
    return "'" + text if text.startswith(FORMULA_START) else text


def xml_attribute(text: str) -> str:
    """An XML attribute value, quoted: `visible` (XML 1.0 allows no control character but tab, CR
    and LF, not even as a reference), and & < > and quotes escaped. xml.sax.saxutils is imported
    here, for the JUnit files that need it: it loads urllib.request, http.client and email, 30-40 ms
    of every process that imports this module (every CLI command and every rank)."""
    from xml.sax.saxutils import quoteattr

    return quoteattr(visible(text))


def html(text: str) -> str:
    """HTML text or an attribute value: `visible`, and & < > " ' escaped."""
    return _html.escape(visible(text), quote=True)


def matplotlib_label(text: str) -> str:
    """A label matplotlib draws: `visible`, and every $ escaped, so that no name is parsed as math
    text (an unbalanced or unknown command in it raises; usetex is off where rdmabench draws)."""
    return visible(text).replace("$", "\\$")


def column(cells: list[str], escape: Callable[[str], str]) -> list[str]:
    """A column of table cells through `escape` (visible or markdown); a column with nothing to
    escape (the usual case, for a million rows) is handed back as it is, after one scan of its text."""
    if _NEEDS[escape].search("".join(cells)) is None:
        return cells
    return [escape(cell) for cell in cells]


def aligned(header: tuple[str, ...], columns: list[list[str]]) -> list[str]:
    """A header and its columns as lines of left-aligned cells, two spaces apart."""
    widths = [max(len(name), max(map(len, column), default=0)) for name, column in zip(header, columns, strict=True)]
    line = "  ".join(f"{{:<{width}}}" for width in widths).format
    return [line(*header).rstrip()] + [line(*cells).rstrip() for cells in zip(*columns, strict=True)]


# What each escape a column goes through changes: a character of these, anywhere in the column.
_NEEDS: dict[Callable[[str], str], re.Pattern[str]] = {visible: _HIDDEN, markdown: _MARKDOWN}
