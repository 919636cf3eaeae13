"""grader.record behaves as dataclass(frozen=True): compared here with the dataclass itself."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from grader.record import record


FROZEN = dataclass(frozen=True)


def point_class(decorate: Callable[[type], Any], name: str) -> Any:
    """Fields the comparison or the repr leaves out, made a class by ``decorate``."""

    class Made:
        x: int
        y: int = 0
        label: str = field(default="", compare=False)
        secret: str = field(default="", repr=False)
        tags: tuple[str, ...] = ()

    Made.__name__ = Made.__qualname__ = name
    return decorate(Made)


Point, Twin = point_class(record, "Point"), point_class(FROZEN, "Twin")


@record(eq=False)
class Token:
    name: str


@record
class Holder:
    items: list[object] = field(default_factory=list)


@record
class Child(Point):
    z: int = 0


def twin(point: Any) -> Any:
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
        point.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.y


def test_the_dataclass_tools_still_apply() -> None:
    point = Point(1, 2, tags=("a",))
    assert dataclasses.is_dataclass(point)
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "label", "secret", "tags"]
    assert dataclasses.replace(point, y=5) == Point(1, 5, tags=("a",))
    assert dataclasses.astuple(point) == (1, 2, "", "", ("a",))
    assert Point.__match_args__ == ("x", "y", "label", "secret", "tags")


def test_records_without_fields_are_all_equal() -> None:
    assert Empty() == Empty() and hash(Empty()) == hash(EmptyTwin()) and repr(Empty()) == "Empty()"


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


def built_class(decorate: Callable[[type], Any], name: str) -> Any:
    """Every way a field gets its value, made a class by ``decorate``."""

    class Made:
        a: int
        b: list[int] = field(default_factory=list)
        c: str = "c"
        late: int = field(default=7, init=False)
        fresh: list[int] = field(default_factory=list, init=False)
        derived: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            object.__setattr__(self, "derived", self.a * 2)

    Made.__name__ = Made.__qualname__ = name
    return decorate(Made)


Built, BuiltTwin = built_class(record, "Built"), built_class(FROZEN, "BuiltTwin")


CALLS = [((1,), {}), ((1, [2]), {}), ((1,), {"c": "x"}), ((), {"a": 3, "b": [4], "c": "y"}), ((1, [2], "z"), {})]
BAD_CALLS = [((), {}), ((1, [2], "z", 4), {}), ((1,), {"a": 2}), ((1,), {"late": 2}), ((1,), {"nope": 2}), ((), {"c": "x"})]


@pytest.mark.parametrize(("args", "kwargs"), CALLS, ids=repr)
def test_the_constructor_gives_every_field_the_dataclass_value(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    mine, theirs = Built(*args, **kwargs), BuiltTwin(*args, **kwargs)
    assert dataclasses.asdict(mine) == dataclasses.asdict(theirs)
    assert repr(mine) == repr(theirs).replace("BuiltTwin(", "Built(")


@pytest.mark.parametrize(("args", "kwargs"), BAD_CALLS, ids=repr)
def test_the_constructor_refuses_what_the_dataclass_refuses(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError) as theirs:
        BuiltTwin(*args, **kwargs)
    with pytest.raises(TypeError) as mine:
        Built(*args, **kwargs)
    assert str(mine.value) == str(theirs.value).replace("BuiltTwin.", "Built.")


def test_each_instance_gets_its_own_factory_value() -> None:
    one, two = Built(1), Built(2)
    assert one.b is not two.b and one.fresh is not two.fresh
    assert one.derived == 2 and two.derived == 4


def test_replace_refuses_a_field_outside_the_constructor_as_dataclasses_does() -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(Built(1), late=3)
    assert dataclasses.replace(Built(1), c="q") == Built(1, c="q")


@record
class Empty:
    """No fields."""


@dataclass(frozen=True)
class EmptyTwin:
    """No fields."""


@pytest.mark.parametrize(("mine", "theirs"), [(Empty, EmptyTwin), (Token, dataclass(frozen=True)(type("TokenTwin", (), {"__annotations__": {"name": "str"}})))])
def test_too_many_arguments_are_worded_as_by_the_dataclass(mine: type, theirs: type) -> None:
    with pytest.raises(TypeError) as expected:
        theirs(1, 2)
    with pytest.raises(TypeError) as got:
        mine(1, 2)
    assert str(got.value) == str(expected.value).replace(theirs.__qualname__, mine.__qualname__)
