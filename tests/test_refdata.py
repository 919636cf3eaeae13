"""Stored references: deterministic regeneration, verification, refusal of bad data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from grader.attention import attention, attention_weights
from grader.errors import ReferenceDataError
from grader.refdata import build_files, load_default_suite, load_references, regenerate


def test_regeneration_is_byte_identical_to_the_stored_files(tmp_path: Path) -> None:
    suite = load_default_suite()
    regenerate(suite, tmp_path / "a")
    regenerate(suite, tmp_path / "b")
    stored = {p.name: p.read_bytes() for p in (ROOT / "reference").iterdir() if p.suffix in (".npy", ".json")}
    for name, data in stored.items():
        assert (tmp_path / "a" / name).read_bytes() == data, name
        assert (tmp_path / "b" / name).read_bytes() == data, name
    assert {p.name for p in (tmp_path / "a").iterdir()} == set(stored)


def test_exact_reference_agrees_with_the_vectorised_one() -> None:
    refs = load_references(load_default_suite())
    for data in refs.cases.values():
        np.testing.assert_allclose(attention_weights(data.Q, data.K), data.weights, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(attention(data.Q, data.K, data.V), data.output, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(data.weights.sum(axis=-1), 1.0, rtol=1e-13)


def test_references_made_for_other_cases_are_refused(tmp_path: Path) -> None:
    suite = load_default_suite()
    files = build_files(suite)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    changed = suite.cases["single"]
    from dataclasses import replace

    other = replace(suite, cases={**suite.cases, "single": replace(changed, seed=changed.seed + 1)})
    with pytest.raises(ReferenceDataError, match="made for other cases"):
        load_references(other, tmp_path)


def test_unreadable_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ReferenceDataError, match="unreadable reference manifest"):
        load_references(load_default_suite(), tmp_path)
