"""Suite validation: every mistake in a suite file is one line naming the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from grader.errors import SuiteError
from grader.suite import load_suite, parse_suite

GOOD = (ROOT / "grader" / "fixtures" / "suite.yaml").read_text()


def test_default_suite_is_valid() -> None:
    suite = load_suite(ROOT / "grader" / "fixtures" / "suite.yaml")
    assert suite.function == "attention"
    assert [c.id for c in suite.checks][:3] == ["load", "shape", "weights"]
    shape = suite.cases["single"].shape
    assert len({shape.tq, shape.tk, shape.dk, shape.dv}) == 4  # no axis mix-up can hide


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}}\nchecks:\n  - id: load\n  - id: shape\n    case: b\n", "s.yaml:7: checks.1.case: unknown case 'b'"),
        ("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}}\nchecks: [{id: load}]\nlimits:\n  timout: 3\n", "s.yaml:6: limits.timout: unknown key 'timout'"),
        ("version: 1\nname: x\ncases:\n  a:\n    seed: 1\n    shape: {tq: two, tk: 3, dk: 4, dv: 5}\nchecks: [{id: load}]\n", "s.yaml:6: cases.a.shape.tq: expected a whole number, got a string 'two'"),
        ("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 0, tk: 3, dk: 4, dv: 5}}}\nchecks: [{id: load}]\n", "s.yaml:3: cases.a.shape.tq: must be at least 1, got 0"),
        ("version: 2\nname: x\n", "s.yaml:1: version: unsupported suite version 2"),
        ("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}}\nchecks: [{id: load}, {id: w, kind: weights, case: a, requires: [shape]}]\n", "'shape' is not a check listed before 'w'"),
        ("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}}\nchecks: [{id: b, kind: batch, case: a}]\n", "case 'a' has no batch axes"),
        ("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}}\nchecks: [{id: load}]\nseverity: {scale-by-dk: fatal}\n", "s.yaml:5: severity.scale-by-dk: expected one of error, warning, off"),
        ("version: 1\nname: [unclosed\n", "s.yaml:3: invalid YAML"),
        ("version: 1\nversion: 1\n", "s.yaml:2: version: duplicate key 'version'"),
        ("- just\n- a list\n", "s.yaml:1: (top level): expected a mapping, got a list"),
        ("", "s.yaml:1: the suite file is empty"),
    ],
)
def test_invalid_suites_name_line_and_key(text: str, expected: str) -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "s.yaml")
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_unreadable_suite_files(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="suite file not found"):
        load_suite(tmp_path / "missing.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(SuiteError, match="not UTF-8"):
        load_suite(tmp_path / "bin.yaml")


def test_fingerprint_changes_with_what_changes_a_verdict() -> None:
    a = parse_suite(GOOD, "a.yaml")
    b = parse_suite(GOOD.replace("rtol: 1.0e-4", "rtol: 1.0e-3"), "b.yaml")
    assert a.digest() == b.digest()  # same cases: same references
    assert a.fingerprint() != b.fingerprint()  # other tolerance: other verdicts


ALIAS_BOMB = "version: 1\nname: bomb\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi")
)


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    """Nine levels of nine aliases would expand to 9^9 values: refused at the first alias, with
    its line, in about the time a small file takes."""
    with pytest.raises(SuiteError) as info:
        parse_suite(ALIAS_BOMB, "bomb.yaml")
    assert str(info.value).startswith("bomb.yaml:4: b.0: YAML aliases are not allowed")


def test_an_anchor_without_an_alias_is_harmless() -> None:
    text = (ROOT / "grader" / "fixtures" / "suite.yaml").read_text().replace("name:", "name: &n", 1)
    assert parse_suite(text, "anchored.yaml", base=ROOT / "grader" / "fixtures").name
