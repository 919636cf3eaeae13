"""A load error's fix says what to do where the file sits: beside a helper but graded alone, or
a module of a package graded on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.diagnosis.load_fixes import placed
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME


def load_error(**evidence: object) -> Diagnosis:
    return Diagnosis.of("load-error", "measured", dict(evidence), ("load",))


@pytest.mark.parametrize("helper", ["layers.py", "layers/__init__.py"])
def test_a_helper_beside_a_file_graded_alone_is_named_with_the_way_to_grade_both(tmp_path: Path, helper: str) -> None:
    (tmp_path / helper).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / helper).write_text("def softmax(x):\n    return x\n")
    graded = tmp_path / "model.py"
    d = load_error(module="layers", message="No module named 'layers'")
    (alone,) = placed([d], graded, alone=True, checkout=False)
    assert "`layers` is beside the file" in alone.fix and "grade --candidate FOLDER" in alone.fix
    (by_name,) = placed([d], graded, alone=False, checkout=False)
    assert by_name.fix == d.fix  # graded by name, its folder is its own: the helper was importable
    (elsewhere,) = placed([load_error(module="plotting", message="No module named 'plotting'")], graded, alone=True, checkout=False)
    assert elsewhere.fix == BY_NAME["load-error"].fix  # nothing of that name beside it


def test_a_relative_import_outside_a_package_points_to_the_checkout(tmp_path: Path) -> None:
    d = load_error(message="attempted relative import with no known parent package")
    (single,) = placed([d], tmp_path / "attention.py", alone=False, checkout=False)
    assert "grade --candidate ROOT" in single.fix
    (checkout,) = placed([d], tmp_path / "attention.py", alone=False, checkout=True)
    assert checkout.fix == d.fix
    (other,) = placed([Diagnosis.of("crash", "measured", {"message": "attempted relative import"})], tmp_path / "a.py", alone=False, checkout=False)
    assert other.fix == BY_NAME["crash"].fix
