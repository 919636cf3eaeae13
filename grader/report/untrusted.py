"""Text from a submission, made inert for the medium that shows it.

Every string of a Report may hold what a submission chose: its printed output, exception
messages, type names and reprs, source lines, file and folder names. Each reporter passes such
text through one of these before its own escaping:

* ``line`` and ``lines`` for what a person reads (terminal, JUnit, CSV, Markdown, Gradescope,
  annotations): every control character is shown as an escape (``\\x1b``, ``\\r``, ``\\u202e``):
  C0 and C1 controls, DEL, the bidi overrides and marks (which reorder what a reader sees), the
  line and paragraph separators, and lone surrogates (an exception message or a non-UTF-8 file
  name through ``os.fsdecode``; no encoder writes them, so one would stop the whole report).
  ``line`` shows the newline as ``\\n`` too, so a name or a message never starts a line of the
  report; ``lines`` keeps newline and tab, the layout of printed output.
* ``no_commands`` for plain text that a CI runner may read: GitHub Actions takes ``##[name]``
  anywhere in a line, and ``::name::`` at the start of one after whitespace, as a workflow
  command. A word joiner (U+2060: invisible, zero cells wide, not whitespace) goes between the
  two characters of every ``##`` and ``::``, wherever they are, since a renderer may wrap or
  fold a long text at any point and start a line with what was in the middle of one.
* ``json_document`` and ``xml_document`` do the same to a whole JSON or XML document without
  changing what it holds: the character is written as a JSON ``\\u`` escape or an XML character
  reference, which every parser reads back as the character itself.

Written here because no library call does it: ``rich.control.escape_control_codes`` escapes five
characters, ``repr`` escapes quotes and backslashes too and keeps the bidi controls, and the
standard json and xml writers emit ``##[`` and a line-leading ``::`` as they are.
"""

from __future__ import annotations

import re

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_SEPARATORS = (0x2028, 0x2029)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_match(match: re.Match[str]) -> str:
    return _escape(ord(match.group()))


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_CONTROLS = {code: _escape(code) for code in (*range(0x20), *range(0x7F, 0xA0), *_BIDI, *_SEPARATORS)}
_CONTROLS_BUT_LAYOUT = {code: escaped for code, escaped in _CONTROLS.items() if chr(code) not in "\n\t"}
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_START_COMMAND = re.compile(r"^([^\S\n]*):(?=:)", re.M)
_PAIRED = re.compile(r"([:#])(?=\1)")


def line(text: str) -> str:
    """``text`` on one line, every control character (newline included) shown as an escape."""
    return _SURROGATE.sub(_escape_match, text.translate(_CONTROLS))


def lines(text: str) -> str:
    """``text`` with its newlines and tabs kept and every other control character escaped."""
    return _SURROGATE.sub(_escape_match, text.translate(_CONTROLS_BUT_LAYOUT))


def no_commands(text: str) -> str:
    """Plain ``text`` in which no line, however it is wrapped, is a workflow command."""
    return _PAIRED.sub("\\1\u2060", text)


def json_document(document: str) -> str:
    """A JSON document (written with ``ensure_ascii``, so with no raw line break in a string)
    that holds the same data and has no ``##[``: outside strings JSON has no ``#``, and in one
    ``\\u0023`` is ``#``. A line of an indented document starts with whitespace and a quote or a
    bracket, never with a string's content."""
    return document.replace("##[", "\\u0023#[")


def xml_document(document: str) -> str:
    """An XML document (written by ElementTree) that holds the same data and on no line of which
    a CI runner finds a workflow command: ``&#35;`` is ``#``, ``&#58;`` is ``:``, and a raw
    carriage return, which a runner ends a line at and a parser turns into a newline, becomes
    ``&#13;``."""
    document = document.replace("\r", "&#13;").replace("##[", "&#35;#[")
    return _LINE_START_COMMAND.sub(lambda m: m.group(1) + "&#58;", document)
