"""Suites a task author writes: the new keys validate with line numbers, groups turn
checks off, masks build as specified, `grade suite new` writes a starter that works end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import CORPUS, EXAMPLES, ROOT
from grader.attention import attention_weights, exact_attention
from grader.cli import cli
from grader.entry import EntryError, load_plan, parse_entry, resolve_entry
from grader.errors import SuiteError
from grader.masks import build_mask, masked_weights
from grader.refdata import load_references, make_inputs
from grader.suite import MaskSpec, Shape, load_suite, parse_suite

HEAD = "version: 1\nname: x\ncases:\n  a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}\n  b: {seed: 2, shape: {batch: [2], tq: 2, tk: 3, dk: 4, dv: 5}}\n"
CHECKS = "checks:\n  - {id: load}\n  - {id: shape, case: a, requires: [load]}\n  - {id: batch, case: b, requires: [shape]}\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + CHECKS + "groups: {batches: false}\n", "s.yaml:10: groups.batches: unknown key 'batches' (expected one of: batch, masks, values)"),
        (HEAD + CHECKS + "groups: {batch: no-thanks}\n", "s.yaml:10: groups.batch: expected true or false, got a string 'no-thanks'"),
        (HEAD + CHECKS + "framework: tensorflow\n", "s.yaml:10: framework: expected one of auto, numpy, torch, jax, got 'tensorflow'"),
        (HEAD + CHECKS + "entry: /abs/attention.py\n", "s.yaml:10: entry: the entry must be a path inside the candidate's folder"),
        (HEAD + CHECKS + "entry: ../up/attention.py:attention\n", "s.yaml:10: entry: the entry must be a path inside"),
        (HEAD + CHECKS + "entry: src/attention.txt\n", "s.yaml:10: entry: the entry must be a .py file or a .ipynb notebook"),
        (HEAD + CHECKS + "entry: src/a.py:not-a-name\n", "s.yaml:10: entry: 'not-a-name' is not a Python function name"),
        (HEAD + CHECKS + "function: attn\nentry: src/a.py:attention\n", "s.yaml:11: entry: names function 'attention' but `function:` says 'attn'"),
        (HEAD + CHECKS + "severity: {scale-by-pi: warning}\n", "s.yaml:10: severity.scale-by-pi: unknown diagnosis 'scale-by-pi'"),
        (HEAD + "checks:\n  - {id: load, enabled: maybe}\n", "s.yaml:7: checks.0.enabled: expected true or false"),
        (HEAD + "checks:\n  - {id: load, enabled: false}\n", "s.yaml:6: checks: every check is turned off"),
        (HEAD + "checks:\n  - {id: load}\n  - {id: m, kind: mask, case: a}\n", "s.yaml:8: checks.1: case 'a' has no mask; a mask check needs cases with `mask:`"),
        (
            "version: 1\nname: x\ncases:\n  a:\n    seed: 1\n    shape: {tq: 2, tk: 3, dk: 4, dv: 5}\n    mask: diagonal\nchecks: [{id: load}]\n",
            "s.yaml:7: cases.a.mask: expected 'causal' or a mapping {padding: [lengths]}, got a string 'diagonal'",
        ),
        (
            "version: 1\nname: x\ncases:\n  a:\n    seed: 1\n    shape: {batch: [2], tq: 2, tk: 3, dk: 4, dv: 5}\n    mask: {padding: [3]}\nchecks: [{id: load}]\n",
            "s.yaml:7: cases.a.mask.padding: expected 2 key lengths (one per batch element), got 1",
        ),
        (
            "version: 1\nname: x\ncases:\n  a:\n    seed: 1\n    shape: {batch: [2], tq: 2, tk: 3, dk: 4, dv: 5}\n    mask:\n      padding: [3, 0]\nchecks: [{id: load}]\n",
            "s.yaml:8: cases.a.mask.padding.1: must be at least 1, got 0",
        ),
        (
            "version: 1\nname: x\ncases:\n  a:\n    seed: 1\n    shape: {tq: 2, tk: 3, dk: 4, dv: 5}\n    mask: {padding: [3]}\nchecks: [{id: load}]\n",
            "s.yaml:7: cases.a.mask.padding: every key length is T_k = 3, so the mask masks nothing",
        ),
        (
            "version: 1\nname: x\ncases:\n  a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}, mask: causal}\nchecks:\n  - {id: load}\n  - {id: w, kind: weights, case: a}\n",
            "s.yaml:7: checks.1: case 'a' has a mask; only a 'mask' check takes masked cases",
        ),
    ],
)
def test_invalid_suites_name_line_and_key(text: str, expected: str) -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "s.yaml")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_groups_and_enabled_turn_checks_off_and_drop_their_requirements() -> None:
    suite = parse_suite(HEAD + CHECKS + "groups: {batch: false}\n", "s.yaml")
    assert [c.id for c in suite.checks] == ["load", "shape"] and suite.disabled == ("batch",)
    suite = parse_suite(HEAD + "checks:\n  - {id: load}\n  - {id: shape, case: a, requires: [load], enabled: false}\n  - {id: batch, case: b, requires: [shape]}\n", "s.yaml")
    assert [c.id for c in suite.checks] == ["load", "batch"]
    assert suite.checks[1].requires == ()  # 'shape' does not run, so it cannot block 'batch'
    assert suite.max_score == 2


def test_entry_and_framework_are_read() -> None:
    suite = parse_suite(HEAD + CHECKS + "entry: src/model/attention.py:self_attention\nframework: torch\n", "s.yaml")
    assert str(suite.entry) == "src/model/attention.py:self_attention"
    assert suite.function == "self_attention" and suite.framework == "torch"
    assert suite.fingerprint() != parse_suite(HEAD + CHECKS, "s.yaml").fingerprint()


def test_broken_suite_file_is_one_line_exit_2() -> None:
    code, out, err = invoke("--suite", str(CORPUS / "suites" / "broken.yaml"), str(EXAMPLES / "correct.py"))
    assert code == 2 and out == ""
    assert err == f"grade: error: {CORPUS / 'suites' / 'broken.yaml'}:10: cases.padded.mask.padding.1: key length 9 is more than T_k = 5\n"


def test_masks_are_built_as_documented() -> None:
    causal = build_mask(MaskSpec("causal"), Shape((), 3, 4, 2, 2))
    assert causal.tolist() == [[True, False, False, False], [True, True, False, False], [True, True, True, False]]
    padded = build_mask(MaskSpec("padding", (4, 2)), Shape((2, 3), 2, 4, 2, 2))
    assert padded.shape == (2, 3, 2, 4) and padded.dtype == bool
    assert padded[0].all() and padded[1, :, :, :2].all() and not padded[1, :, :, 2:].any()


def test_masked_references_are_exact_and_agree_with_the_vectorised_ones() -> None:
    suite = load_suite(CORPUS / "suites" / "masks.yaml")
    refs = load_references(suite)  # verified by checksum
    for name, data in refs.cases.items():
        if data.case.mask is None:
            continue
        mask = build_mask(data.case.mask, data.case.shape)
        np.testing.assert_allclose(data.weights, masked_weights(data.Q, data.K, mask), rtol=1e-12, atol=1e-15)
        assert np.all(data.weights[~mask] == 0.0), name
        np.testing.assert_allclose(data.weights.sum(axis=-1), 1.0, rtol=1e-13)


def test_exact_attention_with_an_all_true_mask_is_bytewise_the_unmasked_one() -> None:
    data = load_suite(ROOT / "grader" / "fixtures" / "suite.yaml").cases["head64"]
    Q, K, V = make_inputs(data)
    plain = exact_attention(Q, K, V)
    keep = exact_attention(Q, K, V, np.ones((Q.shape[0], K.shape[0]), dtype=bool))
    assert plain[0].tobytes() == keep[0].tobytes() and plain[1].tobytes() == keep[1].tobytes()
    np.testing.assert_allclose(plain[0], attention_weights(Q, K), rtol=1e-12)


def test_custom_suite_references_regenerate_byte_identically(tmp_path: Path) -> None:
    suite = CORPUS / "suites" / "masks.yaml"
    code, _, _ = invoke("references", "--regenerate", "--suite", str(suite), "--out", str(tmp_path))
    assert code == 0
    stored = CORPUS / "suites" / "masks.reference"
    names = sorted(p.name for p in stored.iterdir())
    assert names == sorted(p.name for p in tmp_path.iterdir())
    for name in names:
        assert (tmp_path / name).read_bytes() == (stored / name).read_bytes(), name


def test_suite_new_writes_a_working_starter(tmp_path: Path) -> None:
    path = tmp_path / "My Task.yaml"
    code, out, _ = invoke("suite", "new", str(path))
    assert code == 0 and "wrote" in out
    text = path.read_text()
    assert text.count("#") > 20  # commented
    code, out, _ = invoke("suite", "check", str(path))
    assert code == 0 and "valid suite 'my-task'" in out and "turned off: masks" in out
    code, _, _ = invoke("references", "--regenerate", "--suite", str(path))
    assert code == 0 and (tmp_path / "My Task.reference" / "manifest.json").is_file()
    code, out, _ = invoke("--suite", str(path), str(EXAMPLES / "correct.py"))
    assert code == 0, out
    code, out, _ = invoke("--suite", str(path), str(EXAMPLES / "seed_buggy.py"))
    assert code == 1 and "scale-by-dk" in out and "batch-transpose" in out
    # turning the mask group on grades masks with the same references
    path.write_text(text.replace("  masks: false", "  masks: true"))
    code, out, _ = invoke("--suite", str(path), str(CORPUS / "masks" / "mask_after_softmax.py"))
    assert code == 1 and "mask-after-softmax" in out


def test_suite_new_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("mine")
    code, _, err = invoke("suite", "new", str(path))
    assert code == 2 and err == f"grade: error: {path}: already exists; choose another name (an existing suite is never overwritten)\n"
    assert path.read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["task.yaml"]  # no temporary file left
    code, _, err = invoke("suite", "new", str(tmp_path / "missing" / "task.yaml"))
    assert code == 2 and "does not exist" in err


def test_entry_resolution(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "attention.py").write_text("")
    entry = parse_entry("src/pkg/attention.py:attention")
    file = resolve_entry(tmp_path, entry)
    plan = load_plan(file, tmp_path)
    assert plan.module == "pkg.attention"
    assert plan.sys_path == (tmp_path.resolve() / "src", tmp_path.resolve())
    with pytest.raises(EntryError, match="no such file"):
        resolve_entry(tmp_path, parse_entry("src/other.py"))
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text("")
    (tmp_path / "link.py").symlink_to(outside)
    with pytest.raises(EntryError, match="leads outside"):
        resolve_entry(tmp_path, parse_entry("link.py"))
    # a lone file is loaded on its own, as before
    assert load_plan(file).module is None


def test_candidate_option(tmp_path: Path) -> None:
    code, out, _ = invoke("--candidate", str(CORPUS / "forms" / "repo_conventional"))
    assert code == 0 and "PASSED" in out
    code, _, err = invoke("--candidate", str(tmp_path / "nope"))
    assert code == 2 and "nope: no such file or folder" in err
    code, out, _ = invoke("--candidate", str(tmp_path))
    assert code == 1 and "no file defines attention()" in out
