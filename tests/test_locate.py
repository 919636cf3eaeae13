"""Locating a named mistake in the submission's source: read as text, parsed, never run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CORPUS, EXAMPLES
from grader.diagnosis.attach import attach_locations
from grader.diagnosis.locate import MAX_BYTES
from grader.diagnosis.model import Diagnosis, Location


def located(path: Path, name: str, **evidence: object) -> str | None:
    (d,) = attach_locations(path, [Diagnosis.of(name, "measured", dict(evidence))])
    return None if d.location is None else d.location.code


@pytest.mark.parametrize(
    ("path", "name", "fragment"),
    [
        ("buggy/scale-by-dk.py", "scale-by-dk", "/ d_k"),
        ("buggy/einsum-scale-by-dk.py", "scale-by-dk", "/ Q.shape[-1]"),
        ("buggy/prescale-q-by-dk.py", "scale-by-dk", "q = q / q.shape[-1]"),
        ("buggy/scale-multiplied.py", "scale-multiplied", "* np.sqrt(d_k)"),
        ("buggy/scale-multiplied-class.py", "scale-multiplied", "d_k ** 0.5"),
        ("buggy/scale-by-seq-len.py", "scale-by-seq-len", "K.shape[-2]"),
        ("buggy/scale-k-shape1.py", "scale-by-seq-len", "K.shape[1]"),
        ("buggy/scale-len-q0.py", "scale-by-seq-len", "dk = len(Q[0])"),
        ("buggy/scale-by-dv.py", "scale-by-dv", "V.shape[-1]"),
        ("buggy/scale-v-shape1.py", "scale-by-dv", "V.shape[1]"),
        ("buggy/scale-v-shape1.py", "scale-by-seq-len", "V.shape[1]"),
        ("buggy/scale-constant.py", "scale-constant", "/ 8.0"),
        ("buggy/scale-other.py", "scale-other", "** 0.25"),
        ("buggy/scale-log-dk.py", "scale-other", "np.log(d_k)"),
        ("buggy/scale-shape1-no-root.py", "scale-by-dk", "/ Q.shape[1]"),
        ("buggy/scale-shape1-no-root.py", "scale-by-seq-len", "/ Q.shape[1]"),
        ("buggy/scale-missing.py", "scale-missing", "scores = Q @ np.swapaxes(K, -1, -2)"),
        ("buggy/batch-transpose.py", "batch-transpose", "K.T"),
        ("buggy/batch-transpose-method.py", "batch-transpose", "K.transpose()"),
        ("buggy/batch-transpose-dot.py", "batch-transpose", "np.dot(Q, K.T)"),
        ("buggy/softmax-wrong-axis.py", "softmax-wrong-axis", "axis=-2"),
        ("buggy/softmax-axis1.py", "softmax-wrong-axis", "axis=axis"),
        ("buggy/softmax-column-max.py", "softmax-wrong-axis", "axis=-2"),
        ("buggy/softmax-wrong-axis-whole.py", "softmax-wrong-axis", "e.sum()"),
        ("buggy/softmax-missing.py", "softmax-missing", "return scores @ V"),
        ("buggy/softmax-unstable.py", "softmax-unstable", "np.exp(x)"),
        ("buggy/softmax-global-shift.py", "softmax-unstable", "np.max(scores)"),
        ("buggy/returns-weights.py", "returns-weights", "return weights"),
        ("buggy/nondeterministic.py", "nondeterministic", "np.random.rand"),
        ("buggy/hardcoded-shapes.py", "hardcoded", "not in KNOWN"),
        ("buggy/timeout.py", "timeout", "while True"),
        # Indirect scales, in numpy, torch and JAX code (read as text: no framework is imported).
        ("buggy/rank-scale-ndim.py", "scale-constant", "d = K.ndim"),
        ("buggy/rank-scale-dim-torch-class.py", "scale-constant", "/ self.scale"),
        ("buggy/rank-scale-ndim-jax.py", "scale-constant", "jnp.sqrt(k.ndim)"),
        ("buggy/rank-scale-size2-torch.py", "scale-by-seq-len", "d_k = q.size(2)"),
        ("buggy/rank-scale-shape2-einsum.py", "scale-by-seq-len", "Q.shape[2]"),
        ("buggy/rank-transpose01-torch.py", "batch-transpose", "k.transpose(0, 1)"),
        # A softmax's axis wherever it is written: a module built elsewhere is located where it is
        # built, a softmax given no dim where it is called.
        ("buggy/rank-softmax-dim2-torch-module.py", "softmax-wrong-axis", "self.softmax = nn.Softmax(dim=2)"),
        ("buggy/rank-softmax-dim2-torch-global.py", "softmax-wrong-axis", "softmax = nn.Softmax(dim=2)"),
        ("buggy/rank-softmax-nodim-torch.py", "softmax-wrong-axis", "F.softmax(s)"),
        ("buggy/rank-softmax-nodim-torch-dotted.py", "softmax-wrong-axis", "torch.nn.functional.softmax(scores)"),
        ("buggy/rank-softmax-dim1-torch-positional.py", "softmax-wrong-axis", "torch.softmax(scores, 1)"),
        ("buggy/rank-softmax-dim1-torch-method-positional.py", "softmax-wrong-axis", "scores.softmax(1)"),
        ("buggy/rank-softmax-dim-m2-torch-method.py", "softmax-wrong-axis", "scores.softmax(dim=-2)"),
        ("buggy/rank-softmax-axis1-jax.py", "softmax-wrong-axis", "jax.nn.softmax(s, axis=1)"),
        ("buggy/rank-softmax-axis2-jax-lifted.py", "softmax-wrong-axis", "jax.nn.softmax(s, axis=2)"),
    ],
)
def test_the_line_of_each_mistake_is_found(path: str, name: str, fragment: str) -> None:
    code = located(CORPUS / path, name)
    assert code is not None and fragment in code


def test_mutation_points_at_the_array_that_changed() -> None:
    assert located(CORPUS / "buggy/input-mutated-k.py", "input-mutated", array="K") == "K *= 1.0 / np.sqrt(d_k)"
    assert located(CORPUS / "buggy/input-mutated-out.py", "input-mutated", array="K") == "np.multiply(K, 1.0 / np.sqrt(K.shape[-1]), out=K)"


def test_an_exception_is_located_at_the_line_the_worker_saw() -> None:
    assert located(CORPUS / "buggy/crash.py", "crash", line=6) == 'raise ValueError("not implemented")'
    assert located(CORPUS / "buggy/crash.py", "crash", line=999) is None


def test_demo_code_under_main_is_never_the_location(tmp_path: Path) -> None:
    path = tmp_path / "sub.py"
    path.write_text(
        "import numpy as np\n\ndef attention(Q, K, V):\n    return np.swapaxes(K, -1, -2)\n\n"
        'if __name__ == "__main__":\n    x = np.ones((2, 2)).T\n'
    )
    assert located(path, "batch-transpose") is None


def test_a_location_is_only_attached_never_created(tmp_path: Path) -> None:
    assert attach_locations(EXAMPLES / "seed_buggy.py", []) == []


@pytest.mark.parametrize(
    "content",
    [
        b"def attention(Q, K, V)\n    return Q @ K.T\n",  # a syntax error
        b"\xff\xfe\x00\x00 not utf-8 \x80\x81 Q @ K.T",  # not UTF-8 (decoded with replacement)
        b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",  # deep enough to exhaust the parser
        b"# " + b"a" * (MAX_BYTES + 10) + b"\n",  # larger than the grader reads
        b"\x00\x00\x00",
        b"",
    ],
    ids=["syntax-error", "not-utf8", "deep-nesting", "huge", "nul-bytes", "empty"],
)
def test_hostile_files_give_no_location_and_no_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "sub.py"
    path.write_bytes(content)
    for name in ("batch-transpose", "scale-by-dk", "softmax-unstable", "crash", "hardcoded", "input-mutated"):
        located(path, name, line=1)  # must not raise


def test_a_missing_file_gives_no_location(tmp_path: Path) -> None:
    assert located(tmp_path / "gone.py", "batch-transpose") is None


@pytest.mark.parametrize(
    ("path", "name", "fragment"),
    [
        ("buggy/rank-transpose01-torch.py", "batch-transpose", "k.transpose(-2, -1)"),
        ("buggy/rank-scale-size2-torch.py", "scale-by-seq-len", "math.sqrt(q.size(-1))"),
        ("buggy/rank-scale-ndim-jax.py", "scale-constant", "jnp.swapaxes"),
        ("buggy/rank-scale-ndim.py", "scale-constant", "np.swapaxes"),
    ],
)
def test_the_fix_is_written_in_the_submissions_framework(path: str, name: str, fragment: str) -> None:
    (d,) = attach_locations(CORPUS / path, [Diagnosis.of(name, "measured")])
    assert fragment in d.fix


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        # Built with the axis by position, applied in another method.
        ("import torch\nfrom torch import nn\n\nclass A(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.sm = nn.Softmax(2)\n\n    def forward(self, q, k, v):\n        return self.sm(q @ k.mT) @ v\n", "nn.Softmax(2)"),
        # Built with no dim: torch picks one from the rank.
        ("import torch.nn as tnn\n\nSM = tnn.Softmax()\n\ndef attention(Q, K, V):\n    return SM(Q @ K.mT) @ V\n", "tnn.Softmax()"),
        # Imported by its own name, given no axis: scipy then normalises the whole array.
        ("from scipy.special import softmax\n\ndef attention(Q, K, V):\n    return softmax(Q @ K.swapaxes(-1, -2)) @ V\n", "softmax(Q @"),
        ("from torch.nn.functional import softmax as sm\n\ndef attention(q, k, v):\n    return sm(q @ k.mT) @ v\n", "sm(q @"),
        # A module's function takes the array first: torch.sum(e, 1) sums over axis 1.
        ("import torch\n\ndef softmax(x, dim=-1):\n    return x.exp() / x.exp().sum(dim, keepdim=True)\n\n"
         "def attention(q, k, v):\n    e = softmax(q @ k.mT).exp()\n    return e / torch.sum(e, 1, keepdim=True) @ v\n", "torch.sum(e, 1"),
    ],
    ids=["module-positional", "module-no-dim", "scipy-no-axis", "imported-no-dim", "module-function-positional"],
)
def test_a_softmax_axis_is_found_wherever_it_is_written(tmp_path: Path, code: str, fragment: str) -> None:
    path = tmp_path / "sub.py"
    path.write_text(code)
    found = located(path, "softmax-wrong-axis")
    assert found is not None and fragment in found


def test_softmaxes_over_the_last_axis_are_not_the_location(tmp_path: Path) -> None:
    # The last axis every way it is written, and no axis where the default is the last (a helper's
    # own default, jax.nn.softmax): nothing here is the wrong axis.
    path = tmp_path / "sub.py"
    path.write_text(
        "import jax\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
        "def softmax(x, axis=-1):\n    return x.exp() / x.exp().sum(axis, keepdims=True)\n\n"
        "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.sm = nn.Softmax(dim=-1)\n\n"
        "    def forward(self, q, k, v):\n        s = q @ k.mT\n"
        "        return self.sm(s) + F.softmax(s, -1) + torch.softmax(s, dim=-1) + s.softmax(-1) + softmax(s) + jax.nn.softmax(s)\n"
    )
    assert located(path, "softmax-wrong-axis") is None


@pytest.mark.parametrize(
    ("name", "framework", "words"),
    [
        ("input-mutated", "torch", "q.div_"),
        ("softmax-log", "torch", "torch.softmax"),
        ("softmax-log", "jax", "jax.nn.softmax"),
        ("mask-unasked", "torch", "masked_fill"),
        ("mask-inverted", "jax", "jnp.where"),
        ("mask-after-softmax", "torch", "masked_fill"),
        ("mask-ignored", "jax", "jnp.where"),
    ],
)
def test_fixes_are_written_in_the_submission_s_framework(name: str, framework: str, words: str) -> None:
    from grader.diagnosis.fixes import in_framework
    from grader.diagnosis.model import Diagnosis

    numpy_fix = Diagnosis.of(name, "m", {}, ()).fix
    fixed = in_framework(Diagnosis.of(name, "m", {}, ()), framework).fix
    assert words in fixed and fixed != numpy_fix
    assert re.search(r"(?<![j\w])np\.", fixed) is None  # jnp. is JAX's own


NAMED_INPUTS = {
    "torch": (
        "import math\nimport torch\n\ndef attention(query, key, value):\n"
        "    return torch.softmax(query @ key.transpose(-1, -2), dim=-1) @ value\n"
    ),
    "numpy": (
        "import numpy as np\n\ndef attention(q, k, v):\n"
        "    s = q @ np.swapaxes(k, -1, -2)\n    w = np.exp(s - s.max(-1, keepdims=True))\n"
        "    return w / w.sum(-1, keepdims=True) @ v\n"
    ),
}


@pytest.mark.parametrize(("framework", "words", "absent"), [("torch", "query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))", "q @"), ("numpy", "q @ np.swapaxes(k, -1, -2)", "Q @")])
def test_the_fix_uses_the_submission_s_own_input_names(tmp_path: Path, framework: str, words: str, absent: str) -> None:
    path = tmp_path / "attention.py"
    path.write_text(NAMED_INPUTS[framework])
    (d,) = attach_locations(path, [Diagnosis.of("scale-missing", "measured")])
    assert words in d.fix and absent not in d.fix, d.fix


SIZE_READ = [
    # (code, diagnosis, the line blamed): where the wrong size is read, not where it is used
    ("def attention(Q, K, V):\n    scale = V.shape[-1] ** -0.5\n    s = Q @ K.swapaxes(-1, -2) * scale\n    return s @ V\n", "scale-by-dv", "scale = V.shape[-1] ** -0.5"),
    ("def attention(Q, K, V):\n    d_k = K.shape[0]\n    s = Q @ K.swapaxes(-1, -2) / d_k ** 0.5\n    return s @ V\n", "scale-by-seq-len", "d_k = K.shape[0]"),
    # a power mistake is blamed where the power is (not) written, so the division here
    ("def attention(Q, K, V):\n    d_k = K.shape[-1]\n    s = Q @ K.swapaxes(-1, -2) / d_k\n    return s @ V\n", "scale-by-dk", "/ d_k"),
    ("def attention(Q, K, V):\n    d_k = K.shape[-1]\n    scale = 1 / d_k\n    s = Q @ K.swapaxes(-1, -2) * scale\n    return s @ V\n", "scale-by-dk", "scale = 1 / d_k"),
]


@pytest.mark.parametrize(("code", "name", "fragment"), SIZE_READ, ids=["dv-named", "seq-len-named", "dk-used", "dk-named"])
def test_a_scale_is_blamed_where_its_mistake_is_written(tmp_path: Path, code: str, name: str, fragment: str) -> None:
    path = tmp_path / "attention.py"
    path.write_text(code)
    assert fragment in (located(path, name) or "")


def test_the_fix_is_in_the_framework_the_submission_was_graded_in() -> None:
    """NumPy code that imports torch for its own test: graded in NumPy, told the NumPy fix."""
    path = CORPUS / "buggy" / "scale-missing-numpy-torch-test.py"
    (graded,) = attach_locations(path, [Diagnosis.of("scale-missing", "measured")], framework="numpy")
    (guessed,) = attach_locations(path, [Diagnosis.of("scale-missing", "measured")])
    assert "np.swapaxes" in graded.fix and "transpose(-2, -1)" in guessed.fix


NARROWING = [
    ("Q = Q.astype(np.float32)", True),
    ("Q, K, V = (jnp.asarray(x, dtype=jnp.float16) for x in (Q, K, V))", True),
    ("Q = torch.tensor(Q, dtype=torch.float32)", True),
    ("Q = Q.half()", True),
    ("Q = Q.to(torch.bfloat16)", True),
    ("Q = np.float32(Q)", True),
    ("scale = float(Q.shape[-1])", False),  # Python's float, a scalar
    ("Q = Q.astype(np.float64)", False),
    ("Q = np.asarray(Q)", False),
]


@pytest.mark.parametrize(("line", "found"), NARROWING)
def test_reduced_precision_is_located_at_the_narrowing(tmp_path: Path, line: str, found: bool) -> None:
    path = tmp_path / "attention.py"
    path.write_text(f"import numpy as np\n\ndef attention(Q, K, V):\n    {line}\n    return Q @ K.swapaxes(-1, -2) @ V\n")
    assert (located(path, "reduced-precision", dtype=["float32"]) == line) is found


def test_uninitialised_memory_is_where_nondeterminism_comes_from_when_nothing_is_drawn(tmp_path: Path) -> None:
    """torch.empty (or np.empty) holds whatever memory held: two calls differ with no random draw.
    (No corpus file: what that memory holds is up to the allocator, so the verdict could vary.)"""
    path = tmp_path / "attention.py"
    path.write_text(
        "import torch\n\ndef attention(Q, K, V):\n    buf = torch.empty(Q.shape[0], Q.shape[-2], K.shape[-2])\n"
        "    return torch.baddbmm(buf, Q, K.transpose(1, 2)).softmax(-1) @ V\n"
    )
    assert "torch.empty" in (located(path, "nondeterministic") or "")
    path.write_text("import numpy as np\n\ndef attention(Q, K, V):\n    noise = np.random.rand(*Q.shape)\n    buf = np.empty(Q.shape)\n    return Q + noise\n")
    assert "np.random.rand" in (located(path, "nondeterministic") or "")  # a random draw first


def test_an_exception_in_another_file_of_the_candidate_is_located_there(tmp_path: Path) -> None:
    """A package's __init__ imports a module that fails: the line is that module's, not a line of
    the same number in the graded file, and its code is the line the worker read (the grader
    never opens that file: the file now says otherwise). Outside the folder the worker ran in,
    nothing is located."""
    (tmp_path / "pkg").mkdir()
    graded = tmp_path / "pkg" / "attention.py"
    graded.write_text("import numpy as np\n\ndef attention(Q, K, V):\n    return V\n")
    (tmp_path / "pkg" / "trainer.py").write_text("import os\nimport changed_since\n")
    (outside,) = [tmp_path.parent / "secret.py"]
    outside.write_text("a\nb\n")

    def where(file: str, line: int, code: str = "import wandb") -> Location | None:
        (d,) = attach_locations(graded, [Diagnosis.of("load-error", "measured", {"line": line, "file": file, "code": code})], root=tmp_path)
        return d.location

    there = where("pkg/trainer.py", 2)
    assert there is not None and there.file == str((tmp_path / "pkg" / "trainer.py").resolve()) and there.code == "import wandb" and there.observed
    same = where("pkg/attention.py", 3, "forged")
    assert same is not None and same.file == str(graded) and same.code.startswith("def attention") and not same.observed
    assert where("../secret.py", 1) is None


def test_another_files_location_is_written_as_the_graded_file_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Graded as a relative path, a helper module's location is relative too (no machine path
    beside the graded file's own)."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "attention.py").write_text("def attention(Q, K, V):\n    return V\n")
    monkeypatch.chdir(tmp_path)
    (d,) = attach_locations(Path("src/pkg/attention.py"), [Diagnosis.of("crash", "measured", {"line": 5, "file": "src/pkg/ops.py", "code": "batch, seq, dim = x.shape"})], root=tmp_path)
    assert d.location is not None and (d.location.file, d.location.line, d.location.code) == ("src/pkg/ops.py", 5, "batch, seq, dim = x.shape")


def test_scores_scaled_by_sqrt_dk_twice_point_at_the_second(tmp_path: Path) -> None:
    """Two 1/sqrt(d_k) divide by d_k together: the one to drop is the second."""
    path = tmp_path / "twice.py"
    path.write_text(
        "import numpy as np\n\ndef attention(Q, K, V):\n    d_k = Q.shape[-1]\n"
        "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)\n    scores = scores / np.sqrt(d_k)\n"
        "    w = np.exp(scores - scores.max(axis=-1, keepdims=True))\n    return w / w.sum(axis=-1, keepdims=True) @ V\n"
    )
    assert located(path, "scale-by-dk") == "scores = scores / np.sqrt(d_k)"
    path.write_text("import numpy as np\n\ndef attention(Q, K, V):\n    q = Q / np.sqrt(Q.shape[-1])\n    s = q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n    return s\n")
    assert located(path, "scale-by-dk") == "s = q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])"


def test_the_function_the_name_is_last_bound_to_is_the_graded_one(tmp_path: Path) -> None:
    """attention = attention_fast after a correct def attention: the second function is graded
    (Python's last binding), and its line is the one shown."""
    path = tmp_path / "rebound.py"
    path.write_text(
        "import numpy as np\n\ndef attention(Q, K, V):\n    return (Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])) @ V\n\n"
        "def attention_fast(Q, K, V):\n    s = Q @ np.swapaxes(K, -1, -2)\n    return s @ V\n\nattention = attention_fast\n"
    )
    assert located(path, "scale-missing") == "s = Q @ np.swapaxes(K, -1, -2)"
