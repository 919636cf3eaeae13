"""Discovery: which file of a folder or a candidate's checkout is graded, found without importing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.discover import Rule, Submission, defines_function, discover, find_in_checkout
from grader.entry import parse_entry
from grader.errors import UsageError

DEFINES = "import numpy as np\n\ndef attention(Q, K, V):\n    return V\n"


def write(path: Path, text: str = DEFINES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (DEFINES, True),
        ("async def attention(Q, K, V): ...\n", True),
        ("class attention:\n    pass\n", True),
        ("class Attn:\n    def __call__(self, Q, K, V): ...\nattention = Attn()\n", True),
        ("attention: object = None\n", True),
        ("try:\n    import torch\nexcept ImportError:\n    def attention(Q, K, V): ...\n", True),
        ("if True:\n    def attention(Q, K, V): ...\n", True),
        ("from solution import attention\n", False),  # passes it on, does not define it
        ("import attention\n", False),
        ("class Model:\n    def attention(self, Q, K, V): ...\n", False),  # a method, not module level
        ("def helper():\n    def attention(Q, K, V): ...\n", False),
        ("def attention(Q, K, V:\n", False),  # a syntax error is not parsed
    ],
    ids=["def", "async-def", "class", "callable-object", "annotated", "in-try", "in-if", "from-import", "import", "method", "nested", "syntax-error"],
)
def test_defines_function(tmp_path: Path, source: str, expected: bool) -> None:
    assert defines_function(write(tmp_path / "f.py", source), "attention") is expected


def test_defining_file_wins_over_an_importing_one(tmp_path: Path) -> None:
    write(tmp_path / "src" / "impl.py")
    write(tmp_path / "main.py", "from src.impl import attention\n")
    sub = find_in_checkout(tmp_path, Rule())
    assert sub.error is None and sub.file == tmp_path / "src" / "impl.py"


def test_conventional_name_breaks_a_tie(tmp_path: Path) -> None:
    write(tmp_path / "scratch.py")
    write(tmp_path / "solution.py")
    write(tmp_path / "attention.py")
    assert find_in_checkout(tmp_path, Rule()).file == tmp_path / "attention.py"


def test_two_defining_files_are_a_per_candidate_error(tmp_path: Path) -> None:
    write(tmp_path / "a.py")
    write(tmp_path / "b.py")
    sub = find_in_checkout(tmp_path, Rule())
    assert sub.file is None
    assert sub.error == "2 files define attention(): a.py, b.py; choose one with --submission-file"


def test_no_defining_file_is_an_error_but_a_broken_conventional_file_is_graded(tmp_path: Path) -> None:
    write(tmp_path / "notes.py", "x = 1\n")
    sub = find_in_checkout(tmp_path, Rule())
    assert sub.file is None and sub.error is not None and "no file defines attention()" in sub.error
    write(tmp_path / "solution.py", "def attention(Q, K, V:\n")  # graded, to be reported as load-error
    assert find_in_checkout(tmp_path, Rule()).file == tmp_path / "solution.py"


def test_test_files_and_skipped_folders_are_not_candidates(tmp_path: Path) -> None:
    write(tmp_path / "test_attention.py")
    write(tmp_path / "tests" / "conftest.py")
    write(tmp_path / ".hidden" / "attention.py")
    write(tmp_path / "__pycache__" / "attention.py")
    write(tmp_path / "node_modules" / "x" / "attention.py")
    write(tmp_path / "myenv" / "pyvenv.cfg", "home = /usr\n")
    write(tmp_path / "myenv" / "lib" / "attention.py")
    write(tmp_path / "impl.py")
    sub = find_in_checkout(tmp_path, Rule())
    assert sub.file == tmp_path / "impl.py", sub.error
    assert [p.relative_to(tmp_path).as_posix() for p in sub.related] == ["impl.py", "test_attention.py", "tests/conftest.py"]


def test_submission_file_pattern(tmp_path: Path) -> None:
    write(tmp_path / "a.py")
    write(tmp_path / "pkg" / "b.py")
    assert find_in_checkout(tmp_path, Rule(pattern="pkg/*.py")).file == tmp_path / "pkg" / "b.py"
    assert find_in_checkout(tmp_path, Rule(pattern="*.py")).error == "2 files match --submission-file '*.py': a.py, pkg/b.py"
    assert find_in_checkout(tmp_path, Rule(pattern="nope.py")).error == "no file matches --submission-file 'nope.py'"


def test_function_name_follows_the_rule(tmp_path: Path) -> None:
    write(tmp_path / "a.py", "def self_attention(Q, K, V): ...\n")
    write(tmp_path / "b.py")
    assert find_in_checkout(tmp_path, Rule(function="self_attention")).file == tmp_path / "a.py"


def test_links_inside_the_checkout_are_followed_and_loops_end(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    write(checkout / "impl.py")
    (checkout / "sub").mkdir()
    os.symlink(checkout, checkout / "sub" / "loop")  # inside, so followed, but visited once
    os.symlink("impl.py", checkout / "alias.txt")
    sub = find_in_checkout(checkout, Rule())
    assert sub.file == checkout / "impl.py", sub.error


@pytest.mark.parametrize(
    "make",
    ["src-to-root", "src-to-parent", "file-out", "notebook-out", "entry-out", "deep-in-skipped-folder"],
)
def test_a_link_out_of_the_checkout_is_refused_before_anything_is_read(tmp_path: Path, make: str) -> None:
    neighbour = write(tmp_path / "alice" / "attention.py")  # a classmate's work
    checkout = tmp_path / "bob"
    checkout.mkdir()
    rule = Rule()
    if make == "src-to-root":
        os.symlink("/", checkout / "src")
    elif make == "src-to-parent":
        os.symlink("..", checkout / "src")
    elif make == "file-out":
        write(checkout / "impl.py")
        os.symlink(neighbour, checkout / "helpers.py")
    elif make == "notebook-out":
        os.symlink(neighbour, checkout / "attention.ipynb")
    elif make == "entry-out":
        os.symlink(neighbour, checkout / "main.py")
        rule = Rule(entry=parse_entry("main.py:attention"))
    else:
        (checkout / "build" / "lib").mkdir(parents=True)
        write(checkout / "attention.py")
        os.symlink("/etc", checkout / "build" / "lib" / "etc")
    sub = find_in_checkout(checkout, rule)
    assert sub.file is None and sub.related == ()
    assert "leading outside the candidate's folder" in (sub.error or ""), sub.error


def test_a_link_out_refuses_one_candidate_and_the_batch_goes_on(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "attention.py")
    (tmp_path / "bob").mkdir()
    os.symlink("..", tmp_path / "bob" / "src")
    os.symlink(tmp_path / "alice", tmp_path / "carol")  # a neighbour's folder under another name
    os.symlink(tmp_path / "alice" / "attention.py", tmp_path / "dave.py")
    by_name = {Path(s.label).name: s for s in discover([tmp_path], Rule())}
    assert by_name["alice"].file == tmp_path / "alice" / "attention.py"
    assert by_name["bob"].file is None and "src -> .." in (by_name["bob"].error or "")
    for name in ("carol", "dave.py"):
        assert by_name[name].file is None and "another entry of the folder" in (by_name[name].error or "")


def test_folder_holds_loose_files_and_candidates(tmp_path: Path) -> None:
    write(tmp_path / "b.py")
    write(tmp_path / "a.py")
    write(tmp_path / "notes.txt", "not python")
    write(tmp_path / "alice" / "solution.py")
    write(tmp_path / "bob" / "x.py")
    write(tmp_path / "bob" / "y.py")
    write(tmp_path / ".git" / "attention.py")
    outside = write(tmp_path.parent / f"{tmp_path.name}-outside.py")
    os.symlink(outside, tmp_path / "linked.py")
    found = discover([tmp_path], Rule())
    labels = [Path(s.label).name for s in found]
    assert labels == ["a.py", "alice", "b.py", "bob", "linked.py"]
    by_name = {Path(s.label).name: s for s in found}
    assert by_name["alice"].file == tmp_path / "alice" / "solution.py"
    assert by_name["bob"].file is None and "2 files define" in (by_name["bob"].error or "")
    assert by_name["linked.py"].file is None and "outside the folder" in (by_name["linked.py"].error or "")


def test_candidate_mode_grades_the_folder_itself(tmp_path: Path) -> None:
    write(tmp_path / "attention.py")
    write(tmp_path / "helpers.py", "def softmax(x): ...\n")
    [sub] = discover([tmp_path], Rule(), candidate=True)
    assert sub.file == tmp_path / "attention.py" and sub.folder == tmp_path


def test_content_hash_covers_the_files_beside_the_submission(tmp_path: Path) -> None:
    write(tmp_path / "attention.py")
    helper = write(tmp_path / "helpers.py", "SCALE = 1\n")
    first = find_in_checkout(tmp_path, Rule()).content_hash()
    assert find_in_checkout(tmp_path, Rule()).content_hash() == first
    helper.write_text("SCALE = 2\n")
    assert find_in_checkout(tmp_path, Rule()).content_hash() != first


@pytest.mark.parametrize("folder", ["build", "dist", "venv", "node_modules", "__pycache__", ".hidden", "pkg.egg-info"])
def test_content_hash_covers_skipped_folders_the_worker_may_import_from(tmp_path: Path, folder: str) -> None:
    write(tmp_path / "attention.py", "import sys\nsys.path.insert(0, 'build')\nfrom helpers import attention\n")
    helper = write(tmp_path / folder / "helpers.py", "def attention(Q, K, V): return V\n")
    first = find_in_checkout(tmp_path, Rule()).content_hash()
    helper.write_text("def attention(Q, K, V): return Q\n")
    assert find_in_checkout(tmp_path, Rule()).content_hash() != first
    (tmp_path / folder / "data.npy").write_bytes(b"\x93NUMPY")  # not Python, still readable
    assert find_in_checkout(tmp_path, Rule()).content_hash() != first


def test_content_hash_frames_every_name_and_length(tmp_path: Path) -> None:
    # Without framing, these two checkouts feed the same bytes to the digest; one after the other
    # in the same folder, so that its path (hashed too) is the same.
    write(tmp_path / "attention.py", "A")
    write(tmp_path / "b.py", "\0C")
    first = find_in_checkout(tmp_path, Rule(pattern="attention.py")).content_hash()
    (tmp_path / "b.py").unlink()
    write(tmp_path / "attention.py", "A\0b.py\0\0C")
    assert find_in_checkout(tmp_path, Rule(pattern="attention.py")).content_hash() != first


def test_content_hash_covers_where_the_submission_runs(tmp_path: Path) -> None:
    """The same files in another folder: the submission sees its path (__file__, tracebacks,
    warnings), so its printed output may differ, and no verdict is shared."""
    for name in ("one", "two"):
        write(tmp_path / name / "attention.py")
    one, two = (find_in_checkout(tmp_path / name, Rule()).content_hash() for name in ("one", "two"))
    assert one != two and find_in_checkout(tmp_path / "one", Rule()).content_hash() == one


def test_content_hash_leaves_out_git_and_hashes_links_as_links(tmp_path: Path) -> None:
    write(tmp_path / "attention.py")
    write(tmp_path / "real.py", "X = 1\n")
    os.symlink("real.py", tmp_path / "alias.py")
    config = write(tmp_path / ".git" / "config", "[remote]\n")
    first = find_in_checkout(tmp_path, Rule()).content_hash()
    config.write_text("token = abc\n")  # the worker never sees .git/: no new verdict needed
    assert find_in_checkout(tmp_path, Rule()).content_hash() == first
    (tmp_path / "alias.py").unlink()
    os.symlink("attention.py", tmp_path / "alias.py")
    assert find_in_checkout(tmp_path, Rule()).content_hash() != first


def test_content_hash_of_a_loose_file_is_its_name_and_bytes(tmp_path: Path) -> None:
    path = write(tmp_path / "a.py")
    write(tmp_path / "b.py")  # a neighbour, which the loose file's worker never sees
    [loose] = [s for s in discover([tmp_path], Rule()) if s.file == path]
    assert loose.loose
    first = loose.content_hash()
    (tmp_path / "b.py").write_text("x = 2\n")
    assert Submission(str(path), path, loose=True).content_hash() == first


def test_content_hash_of_a_file_graded_by_name_covers_its_folder(tmp_path: Path) -> None:
    """Its worker may read its folder (helper modules, data): two candidates' identical
    ``from impl import attention`` files beside different impl.py must not share a verdict, nor
    one candidate's file after its helper changed."""
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for folder, body in ((alice, "return V"), (bob, "return Q")):
        write(folder / "solution.py", "from impl import attention\n")
        write(folder / "impl.py", f"def attention(Q, K, V):\n    {body}\n")
    [a], [b] = discover([alice / "solution.py"], Rule()), discover([bob / "solution.py"], Rule())
    assert not a.loose and a.content_hash() != b.content_hash()
    first = a.content_hash()
    (alice / "data").mkdir()
    (alice / "data" / "scale.txt").write_text("2.0\n")
    assert a.content_hash() != first


@pytest.mark.parametrize("make", ["missing", "empty", "text"])
def test_bad_paths_are_usage_errors(tmp_path: Path, make: str) -> None:
    target = {"missing": tmp_path / "nope", "empty": tmp_path, "text": write(tmp_path / "notes.txt", "x")}[make]
    with pytest.raises(UsageError):
        discover([target], Rule())


def test_a_huge_checkout_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.discover as discover_module

    monkeypatch.setattr(discover_module, "MAX_CHECKOUT_BYTES", 200)
    monkeypatch.setattr(discover_module, "MAX_PARSED_PER_CHECKOUT", 200)
    write(tmp_path / "a_big.py", "# padding\n" * 30 + DEFINES)  # over the budget: not parsed
    write(tmp_path / "solution.py", "x = 1\n")
    sub = find_in_checkout(tmp_path, Rule())
    assert sub.file == tmp_path / "solution.py"  # the conventional name still decides
    with pytest.raises(discover_module.TooLarge):
        sub.content_hash()


def test_the_parser_refuses_a_source_too_long_to_parse_cheaply() -> None:
    from grader.frameworks import MAX_PARSED_BYTES, SourceTooLarge, parse_quietly

    parse_quietly("def attention(Q, K, V):\n    return V\n" + "#" * (MAX_PARSED_BYTES - 100))
    with pytest.raises(SourceTooLarge):
        parse_quietly("x = [" + "1," * MAX_PARSED_BYTES + "]\n")


def test_generated_files_in_a_checkout_cost_the_parser_a_bounded_amount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six generated files of 1.9 MB once took discovery half a minute and a gigabyte: now files
    over the parser's cap are not parsed, files that never name the function are not parsed,
    and the rest is parsed up to a budget per checkout."""
    import grader.discover as discover_module
    from grader.frameworks import MAX_PARSED_BYTES

    for i in range(6):
        (tmp_path / f"generated_{i}.py").write_text("attention = [" + "1," * 950_000 + "]\n")
    for i in range(40):
        (tmp_path / f"medium_{i:02}.py").write_text("# uses attention\nvalues = [" + "1," * (MAX_PARSED_BYTES // 4) + "]\n")
        (tmp_path / f"unrelated_{i:02}.py").write_text("values = [" + "1," * (MAX_PARSED_BYTES // 4) + "]\n")
    (tmp_path / "zz_attention.py").write_text("def attention(Q, K, V):\n    return V\n")
    parsed: list[int] = []
    real = discover_module.parse_quietly

    def recording(source: bytes, filename: str = "<unknown>") -> object:
        parsed.append(len(source))
        return real(source, filename=filename)

    monkeypatch.setattr(discover_module, "parse_quietly", recording)
    find_in_checkout(tmp_path, Rule())
    assert parsed and max(parsed) <= MAX_PARSED_BYTES
    assert sum(parsed) <= discover_module.MAX_PARSED_PER_CHECKOUT + MAX_PARSED_BYTES


NOTEBOOK = '{"cells": [{"cell_type": "code", "metadata": {}, "source": "import numpy as np\\ndef attention(Q, K, V):\\n    return V\\n"}], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}'


def test_a_notebook_of_a_checkout_is_named_and_can_be_chosen(tmp_path: Path) -> None:
    """A checkout whose function is in a notebook under another name than attention.ipynb: the
    error says which, and --submission-file chooses it (a checkpoint copy is never counted)."""
    write(tmp_path / "helpers.py", "def softmax(x):\n    return x\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "analysis.ipynb").write_text(NOTEBOOK)
    (tmp_path / "notebooks" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "notebooks" / ".ipynb_checkpoints" / "analysis-checkpoint.ipynb").write_text(NOTEBOOK)
    found = find_in_checkout(tmp_path, Rule())
    assert found.file is None and found.error is not None
    assert found.error.endswith("the notebook notebooks/analysis.ipynb defines attention(): choose it with --submission-file notebooks/analysis.ipynb")
    chosen = find_in_checkout(tmp_path, Rule(pattern="notebooks/analysis.ipynb"))
    assert chosen.file == tmp_path / "notebooks" / "analysis.ipynb" and chosen.error is None
    assert find_in_checkout(tmp_path, Rule(pattern="**/*.ipynb")).file == tmp_path / "notebooks" / "analysis.ipynb"


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        ("def scaled_dot_product_attention(q, k, v, mask=None):\n    return v\n", "; model.py defines scaled_dot_product_attention(): grade it with --function scaled_dot_product_attention"),
        ("class MultiHead:\n    def attention(self, q, k, v):\n        return v\n", "; MultiHead.attention in model.py is a method, and the graded function must be at module level (a function of the file that calls it)"),
        ("def attn_a(q, k, v):\n    return v\n\ndef attn_b(q, k, v):\n    return v\n", ""),  # two look alike: no guess
        ("class SelfAttention:\n    pass\n", ""),  # a class is never offered as the function
    ],
    ids=["other-name", "method", "two-names", "class"],
)
def test_a_checkout_without_the_function_says_what_it_has_instead(tmp_path: Path, code: str, hint: str) -> None:
    write(tmp_path / "model.py", code)
    error = find_in_checkout(tmp_path, Rule()).error
    assert error == "no file defines attention() at module level (looked at 1 Python file)" + hint


def test_the_files_passed_over_are_named(tmp_path: Path) -> None:
    """attention.py is chosen by its name before solution.py, which defines attention() too."""
    write(tmp_path / "attention.py")
    write(tmp_path / "solution.py")
    write(tmp_path / "notes.py", "x = 1\n")
    found = find_in_checkout(tmp_path, Rule())
    assert found.file == tmp_path / "attention.py" and found.passed_over == (tmp_path / "solution.py",)
    assert find_in_checkout(tmp_path, Rule(pattern="solution.py")).passed_over == ()


def test_a_submission_given_twice_is_graded_once(tmp_path: Path) -> None:
    a = write(tmp_path / "batch" / "a.py")
    write(tmp_path / "batch" / "b.py")
    found = discover([a, tmp_path / "batch", a, Path(str(a).replace("/batch/", "/batch/./"))], Rule())
    assert [s.file for s in found] == [a, tmp_path / "batch" / "b.py"]
    assert not found[0].loose  # as first given: by name
