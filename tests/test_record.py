"""grader.record behaves as dataclass(frozen=True): compared here with the dataclass itself."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from grader.record import record


@record
class Point:
    x: int
    y: int = 0
    label: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Twin:
    x: int
    y: int = 0
    label: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    tags: tuple[str, ...] = ()


@record(eq=False)
class Token:
    name: str


@record
class Holder:
    items: list[object] = field(default_factory=list)


@record
class Child(Point):
    z: int = 0


def twin(point: Point) -> Twin:
    return Twin(**dataclasses.asdict(point))


EXAMPLES = [Point(1), Point(1, 2, "a", "s", ("t",)), Point(-3, label="other"), Point(0, secret="hidden")]


@pytest.mark.parametrize("point", EXAMPLES, ids=repr)
def test_repr_is_the_dataclass_repr(point: Point) -> None:
    assert repr(point) == repr(twin(point)).replace("Twin(", "Point(")


@pytest.mark.parametrize("a", EXAMPLES, ids=repr)
@pytest.mark.parametrize("b", EXAMPLES, ids=repr)
def test_equality_and_hash_follow_the_compared_fields(a: Point, b: Point) -> None:
    assert (a == b) == (twin(a) == twin(b))
    assert (a != b) == (twin(a) != twin(b))
    if a == b:
        assert hash(a) == hash(b)
    assert hash(a) == hash(twin(a))


def test_a_label_that_is_not_compared_does_not_matter() -> None:
    assert Point(1, 2, label="a") == Point(1, 2, label="b")
    assert len({Point(1, 2, label="a"), Point(1, 2, label="b"), Point(2, 1)}) == 2


def test_other_classes_are_never_equal() -> None:
    assert Point(1) != Twin(1)
    assert Point(1) != (1, 0, "", "", ())
    assert Child(1) != Point(1)
    assert Child(1, z=2) == Child(1, z=2) != Child(1, z=3)
    assert repr(Child(1, z=2)) == "Child(x=1, y=0, label='', tags=(), z=2)"


def test_frozen() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.y  # type: ignore[misc]


def test_the_dataclass_tools_still_apply() -> None:
    point = Point(1, 2, tags=("a",))
    assert dataclasses.is_dataclass(point)
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "label", "secret", "tags"]
    assert dataclasses.replace(point, y=5) == Point(1, 5, tags=("a",))
    assert dataclasses.astuple(point) == (1, 2, "", "", ("a",))
    assert Point.__match_args__ == ("x", "y", "label", "secret", "tags")


def test_identity_records_compare_by_identity() -> None:
    a, b = Token("t"), Token("t")
    assert a != b and a == a
    assert len({a, b}) == 2
    assert repr(a) == "Token(name='t')"


def test_a_record_that_holds_itself_has_a_finite_repr() -> None:
    holder = Holder()
    holder.items.append(holder)
    assert repr(holder) == "Holder(items=[...])"


def test_unhashable_fields_make_an_unhashable_record_as_with_dataclasses() -> None:
    with pytest.raises(TypeError):
        hash(Holder())
