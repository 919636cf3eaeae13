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
  So is every character that is invisible or changes its neighbours without being seen itself,
  since two names that read the same let one candidate pose as another (``vict\\u200bim.py``
  beside ``victim.py``): the default-ignorable code points (zero-width spaces and joiners, soft
  hyphen, variation selectors, Hangul fillers, tags), the other format characters (category Cf),
  and every combining mark after the second of a run, which piles up over a letter or strikes a
  word; two are kept, so a decomposed accent (macOS's NFD file names) or Vietnamese reads right.
  The one exception is the word joiner ``no_commands`` puts between ``::`` or ``##``: a text
  already made inert may be shown again (an HTML filter's value goes through the page's
  finalize), and there the joiner must stay invisible, not turn into ``\\u2060``.
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
import unicodedata

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_SEPARATORS = (0x2028, 0x2029)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# Invisible, as ranges (first, last): Unicode's Default_Ignorable_Code_Point, then the format
# characters (Cf) that are not in it, then the lone surrogates. Written out, not found by a loop
# over unicodedata, which would cost every start of `grade` a pass over all of Unicode; a test
# checks them against unicodedata. U+2060 is left to _JOINER.
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2061, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
_FORMAT = (
    (0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0xFFF9, 0xFFFB),
)
_SURROGATES = ((0xD800, 0xDFFF),)
MARKS_KEPT = 2  # of a run of combining marks: an accent and one more (Vietnamese stacks two)


def _escape_match(match: re.Match[str]) -> str:
    return _escape(ord(match.group()))


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(re.escape(chr(first)) + ("-" + re.escape(chr(last)) if last > first else "") for first, last in ranges)


_CONTROLS = {code: _escape(code) for code in (*range(0x20), *range(0x7F, 0xA0), *_BIDI, *_SEPARATORS)}
_CONTROLS_BUT_LAYOUT = {code: escaped for code, escaped in _CONTROLS.items() if chr(code) not in "\n\t"}
# A word joiner but one between the two characters of a pair, where no_commands puts it.
_JOINER = "(?!(?<=:)\u2060:|(?<=#)\u2060#)\u2060"
_INVISIBLE = re.compile(f"[{_char_class(_IGNORABLE + _FORMAT + _SURROGATES)}]|{_JOINER}")
# Where a run of three combining marks may be: three characters in a row that are not below
# U+0300 (where the marks begin), a letter, a digit or a space (no mark is, a test checks it).
# Which of them are marks is then asked of unicodedata, so only such runs cost a lookup each,
# and the marks are those of the Unicode version this Python has.
_MAYBE_PILE = re.compile(f"[^\\w\\s\\x00-\\u02ff]{{{MARKS_KEPT + 1},}}")
_LINE_START_COMMAND = re.compile(r"^([^\S\n]*):(?=:)", re.M)
_PAIRED = re.compile(r"([:#])(?=\1)")


def _flatten_pile(match: re.Match[str]) -> str:
    """The run with every combining mark after the MARKS_KEPT-th in a row shown as an escape."""
    shown: list[str] = []
    marks = 0
    for char in match.group():
        marks = marks + 1 if unicodedata.category(char) in ("Mn", "Me") else 0
        shown.append(_escape(ord(char)) if marks > MARKS_KEPT else char)
    return "".join(shown)


def _visible(text: str) -> str:
    """``text`` (its controls already escaped) with nothing invisible left in it."""
    return _MAYBE_PILE.sub(_flatten_pile, _INVISIBLE.sub(_escape_match, text))


def line(text: str) -> str:
    """``text`` on one line, every control and invisible character (newline included) shown
    as an escape, and every combining mark past the second of a run."""
    return _visible(text.translate(_CONTROLS))


def lines(text: str) -> str:
    """``text`` with its newlines and tabs kept and every other control and invisible character
    (and every combining mark past the second of a run) shown as an escape."""
    return _visible(text.translate(_CONTROLS_BUT_LAYOUT))


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
