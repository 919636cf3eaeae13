"""The grader works wherever its dependencies and the frameworks are installed.

The worker may read (never write) every folder the grader's Python imports from, and imports
from them in the same order, whatever put them on ``sys.path``: the venv itself, a ``.pth`` file
pointing into another prefix, PYTHONPATH, or the user site of a ``--system-site-packages`` venv
(outside both prefixes). Each layout is built at run time from this test process's own
site-packages (new venvs made with ``--without-pip``, one per module), then graded with that
layout's Python as a subprocess: a correct PyTorch and a correct JAX submission pass with no
output of their own, and a submission that goes looking for the references, the cache, the home
folder or a writable install folder finds nothing. A module the grader can import and the worker
cannot is the grader's environment: not graded, exit 2, nothing cached.

The grader's package itself may sit in the folder the submission imports from (site-packages, the
user site, a --target folder, a source folder): with a tiny package beside it, each such layout is
graded by fresh and by forked workers, which must find every module where the grader finds it
(a module named like a standard-library one included), pass the right submission, fail the
wrong one for its mistake, and never import the grader's package again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import CORPUS
from grader import cache as cache_module
from grader.cache import ResultCache
from grader.cli import cli
from grader.errors import ExitCode
from grader.observation import ErrorInfo, LoadInfo
from grader.pipeline import environment_problem
from grader.refdata import default_reference_dir
from grader.sandbox.isolation.paths import default_readable_paths, import_path

REQUIRE_FRAMEWORKS = os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1"
LAYOUTS = ["venv", "pth", "pythonpath", "system-site"]
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


def _providers() -> list[str]:
    """The site-packages folders this test process imports numpy, torch, jax and the grader's
    dependencies from."""
    folders = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    found: list[str] = []
    for folder in folders:
        if os.path.isdir(folder) and os.path.realpath(folder) not in found:
            found.append(os.path.realpath(folder))
    return found


def _editable_lines(folders: list[str]) -> list[str]:
    """The import lines of an editable install of the grader (its finder lives in site-packages):
    a folder put on sys.path by a .pth line or PYTHONPATH is not a site folder, so its .pth files
    are not run; a layout runs them itself, after the folder is on sys.path."""
    lines: list[str] = []
    for folder in folders:
        for pth in sorted(Path(folder).glob("__editable__*.pth")):
            lines += [line for line in pth.read_text().splitlines() if line.startswith("import ")]
    return lines


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / VERSION / "site-packages"


def _make_venv(where: Path, *options: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *options, str(where)], check=True, capture_output=True, timeout=120)
    return where


class Layout:
    def __init__(self, name: str, python: str, env: dict[str, str], writable_probe: str, home: Path | None = None) -> None:
        self.name, self.python, self.env, self.writable_probe, self.home = name, python, env, writable_probe, home


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Layout]:
    """The four layouts, built once for this module (about 2 s per venv)."""
    base = tmp_path_factory.mktemp("layouts")
    providers = _providers()
    editable = _editable_lines(providers)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV")}
    built = {"venv": Layout("venv", sys.executable, env, providers[0])}

    # A .pth file in a new venv points into this one (conda and cluster module systems do this).
    linked = _make_venv(base / "linked")
    (_site_packages(linked) / "frameworks.pth").write_text("\n".join([*providers, *editable, ""]))
    built["pth"] = Layout("pth", str(linked / "bin" / "python"), env, providers[0])

    # PYTHONPATH names this venv's site-packages for a bare new venv.
    bare = _make_venv(base / "bare")
    if editable:
        (_site_packages(bare) / "grader_editable.pth").write_text("\n".join([*editable, ""]))
    built["pythonpath"] = Layout("pythonpath", str(bare / "bin" / "python"), {**env, "PYTHONPATH": os.pathsep.join(providers)}, providers[0])

    # A --system-site-packages venv: the base's site folders (outside sys.prefix) and its user
    # site join sys.path. The base interpreter need not have numpy, torch or the grader's
    # dependencies, so they come from the user site (``pip install --user``), under a home
    # folder of its own: a folder below home is readable, home itself is not.
    system = _make_venv(base / "system", "--system-site-packages")
    home = base / "home"
    user_site = home / ".local" / "lib" / VERSION / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "frameworks.pth").write_text("\n".join([*providers, *editable, ""]))
    (home / "secret.txt").write_text("the home folder is not the worker's\n")
    system_env = {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    check = subprocess.run([str(system / "bin" / "python"), "-c", "import site, sys; print(site.ENABLE_USER_SITE, site.getusersitepackages() in sys.path)"], env=system_env, capture_output=True, text=True, timeout=60)
    assert check.stdout.split() == ["True", "True"], check.stdout + check.stderr
    built["system-site"] = Layout("system-site", str(system / "bin" / "python"), system_env, str(user_site), home)
    return built


def _grade(layout: Layout, folder: Path, cache: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [layout.python, "-m", "grader", "--format", "json", "--cache-dir", str(cache), *extra, str(folder)],
        cwd=folder, env={**layout.env, "CI": "true"}, capture_output=True, text=True, timeout=300,
    )
    try:
        document = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"{layout.name}: no JSON report (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return proc.returncode, {Path(s["path"]).name: s for s in document["submissions"]}, proc.stderr


def _framework_available(name: str) -> bool:
    if importlib.util.find_spec(name) is not None:
        return True
    if REQUIRE_FRAMEWORKS:
        pytest.fail(f"{name} is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
    return False


@pytest.mark.framework
@pytest.mark.parametrize("name", LAYOUTS)
def test_correct_framework_submissions_pass_and_print_nothing(layouts: dict[str, Layout], name: str, tmp_path: Path) -> None:
    wanted = [f for f in ("torch", "jax") if _framework_available(f)]
    if not wanted:
        pytest.skip("neither torch nor jax is installed")
    folder = tmp_path / "subs"
    folder.mkdir()
    for framework in wanted:
        (folder / f"{framework}_correct.py").write_text((CORPUS / "forms" / f"{framework}_correct.py").read_text())
    code, reports, stderr = _grade(layouts[name], folder, tmp_path / "cache")
    assert code == ExitCode.OK, stderr
    for framework in wanted:
        report = reports[f"{framework}_correct.py"]
        assert report["passed"] and report["error"] is None, report
        assert report["extra"]["framework"] == framework
        # Nothing the sandbox made the framework say (torch's "Error in cpuinfo", XNNPACK's warning).
        assert report["output"]["text"] == "", report["output"]


STEAL = '''
import os
import numpy as np

LEAKS = []


def _try(label, action):
    try:
        result = action()
    except OSError:
        return
    if result is not False:
        LEAKS.append(label)


def _write(folder):
    with open(os.path.join(folder, "planted_by_submission.py"), "w") as handle:
        handle.write("x = 1\\n")


for label, kind, path in PROBES:
    if kind == "read":
        _try(label, lambda path=path: open(path, "rb").read(16))
    elif kind == "list":
        _try(label, lambda path=path: bool(os.listdir(path)))
    elif kind == "write":
        _try(label, lambda path=path: _write(path))
print("LEAKS", sorted(LEAKS))


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
'''


@pytest.mark.parametrize("name", LAYOUTS)
def test_a_submission_still_cannot_reach_the_references(layouts: dict[str, Layout], name: str, tmp_path: Path) -> None:
    """tests/hostile/steal_references.py's idea, aimed: the stored references, the grader's
    source, the result cache (placed inside a readable install folder), the home folder, and a
    write into the folder the frameworks come from."""
    layout = layouts[name]
    references = default_reference_dir()
    import grader

    package = Path(grader.__file__).resolve().parent
    # The cache inside the layout's own prefix, which the worker may read (not the current venv's).
    cache = tmp_path / "cache" if name == "venv" else Path(layout.python).parent.parent / "grader-cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "planted.json").write_text("{}")
    probes = [
        ("references", "list", str(references)),
        *[("reference file", "read", str(p)) for p in sorted(references.glob("*.npy"))[:3]],
        ("grader source", "read", str(package / "attention.py")),
        ("cache", "list", str(cache)),
        ("cache entry", "read", str(cache / "planted.json")),
        ("install folder", "write", layout.writable_probe),
    ]
    if layout.home is not None:
        probes += [("home", "list", str(layout.home)), ("home file", "read", str(layout.home / "secret.txt"))]
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "steal.py").write_text(f"PROBES = {probes!r}\n" + STEAL)
    planted = Path(layout.writable_probe) / "planted_by_submission.py"
    try:
        code, reports, stderr = _grade(layout, folder, cache)
    finally:
        written = planted.exists()
        planted.unlink(missing_ok=True)
    assert not written, "the worker wrote into an install folder"
    report = reports["steal.py"]
    assert report["output"]["text"].strip() == "LEAKS []", report["output"]
    assert report["passed"], report
    assert code == ExitCode.OK, stderr


# --------------------------------------------------------------------------------------------
# Not graded when the worker cannot import what the grader can


def test_a_module_only_the_grader_can_import_is_not_graded_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny package on the grader's sys.path (added after the worker's import path was fixed,
    as a folder the policy does not pass on would be): the worker cannot import it."""
    extra = tmp_path / "extra"
    (extra / "tinypkg").mkdir(parents=True)
    (extra / "tinypkg" / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(extra))
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "uses_tinypkg.py").write_text("import numpy as np\nimport tinypkg\n\n\ndef attention(Q, K, V):\n    return V\n")
    cache = tmp_path / "cache"
    result = CliRunner().invoke(cli, ["--format", "json", "--cache-dir", str(cache), str(subs / "uses_tinypkg.py")], env={"GITHUB_ACTIONS": None, "CI": "true"})
    assert result.exit_code == ExitCode.USAGE, result.output
    stdout = result.stdout
    report = json.loads(stdout)["submissions"][0]
    assert report["worker_status"] == "not-run" and not report["passed"]
    assert "\n" not in report["error"]
    assert "not graded" in report["error"] and "tinypkg" in report["error"] and str(extra / "tinypkg") in report["error"]
    assert "load" not in [c["id"] for c in report["checks"]]  # never a load-error verdict
    errors = [line for line in result.stderr.splitlines() if line.startswith("grade: error:")]
    assert len(errors) == 1 and "tinypkg" in errors[0]
    assert not list(cache.rglob("*.json")), "nothing of it is cached"


def _load_error(kind: str, message: str, code: str | None = "import something") -> LoadInfo:
    frames = ({"file": "sub.py", "line": 1, "function": "<module>", "code": code},) if code is not None else ()
    return LoadInfo(ok=False, reason="load-error", error=ErrorInfo(kind, message, 1 if frames else None, "sub.py" if frames else None, frames))


def test_what_is_an_environment_problem_and_what_is_the_candidates(tmp_path: Path) -> None:
    numpy_file = importlib.util.find_spec("numpy").origin  # type: ignore[union-attr]
    sub = tmp_path / "sub.py"
    # The grader has it, the worker could not import or read it: the environment.
    assert "numpy" in (environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'numpy'")) or "")
    assert "numpy.linalg" in (environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'numpy.linalg'")) or "")
    denied = _load_error("PermissionError", f"[Errno 13] Permission denied: '{numpy_file}'", code=None)  # a framework import: no frame
    assert "not graded" in (environment_problem(sub, denied) or "")
    # The candidate's: nowhere to be found, the grader's own package, a read that is no import,
    # an error the submission raises itself, another error type, a module in its own folder.
    assert environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'surely_not_installed_anywhere'")) is None
    assert environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'numpy.surely_not_a_submodule'")) is None
    assert environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'grader.refdata'")) is None
    assert environment_problem(sub, _load_error("PermissionError", f"[Errno 13] Permission denied: '{numpy_file}'", code="open(PATH).read()")) is None
    assert environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'numpy'", code='raise ModuleNotFoundError("No module named numpy")')) is None
    assert environment_problem(sub, _load_error("ImportError", "cannot import name 'nothing' from 'numpy' (somewhere)")) is None
    assert environment_problem(sub, _load_error("NameError", "name 'np' is not defined")) is None
    numpy_folder = str(Path(numpy_file).parent.parent)  # type: ignore[arg-type]
    assert environment_problem(sub, _load_error("ModuleNotFoundError", "No module named 'numpy'"), (numpy_folder,)) is None


# --------------------------------------------------------------------------------------------
# The readable paths and the import path


def test_the_import_path_leaves_out_the_current_folder_home_and_what_holds_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    below_home = home / ".local" / "lib" / "site-packages"
    elsewhere = tmp_path / "prefix" / "site-packages"
    here = tmp_path / "here"
    for folder in (below_home, elsewhere, here):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    entries = ["", ".", str(here), str(home), str(below_home), str(elsewhere), "/", str(tmp_path / "missing"), str(elsewhere)]
    assert import_path(entries) == (str(below_home.resolve()), str(elsewhere.resolve()))


def test_every_sys_path_folder_is_readable_but_not_the_current_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "on-sys-path"
    here = tmp_path / "here"
    extra.mkdir()
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.syspath_prepend(str(extra))
    monkeypatch.syspath_prepend(str(here))
    readable = default_readable_paths()
    assert str(extra.resolve()) in readable
    assert not any(str(here.resolve()) == p or str(here.resolve()).startswith(p + "/") for p in readable if p.startswith(str(tmp_path)))
    assert "/proc/cpuinfo" in readable or not os.path.exists("/proc/cpuinfo")


# --------------------------------------------------------------------------------------------
# The cache key covers the environment


def test_the_cache_key_changes_with_the_numpy_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = cache_module.importlib.metadata.version

    def key_with(numpy_version: str) -> str:
        monkeypatch.setattr(cache_module.importlib.metadata, "version", lambda name: numpy_version if name == "numpy" else real(name))
        return ResultCache(tmp_path, {"suite": "s"}).key("content")

    assert key_with("1.26.4") != key_with("2.0.0")
    assert key_with("2.0.0") == key_with("2.0.0")


def test_the_cache_key_changes_with_a_framework_and_the_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    found = cache_module.environment()
    assert set(found) == {"python", "numpy", "torch", "jax", "jaxlib"} and found["numpy"]
    plain = ResultCache(tmp_path, {}).key("content")
    for changed in ({"torch": "0.0.1"}, {"jax": "0.0.1"}, {"python": "CPython 3.0.0"}):
        monkeypatch.setattr(cache_module, "environment", lambda changed=changed: {**found, **changed})
        assert ResultCache(tmp_path, {}).key("content") != plain


# --------------------------------------------------------------------------------------------
# The worker's import path is the grader's, in the grader's order, in every install layout

# A package installed next to the grader (einops in a `pip install --user`, say): the good and the
# bad submission compute with it.
TINYPKG = '''
import numpy as np


def attention(Q, K, V, scaled=True):
    scores = Q @ np.swapaxes(K, -1, -2)
    scores = scores / np.sqrt(Q.shape[-1]) if scaled else scores
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
'''

# Where the worker found each module: the grader's process must have found the same files. colorsys
# is a standard-library module that the layouts also put in the grader's folder: after the
# standard library on the path (site-packages, the user site) it must not be taken, before it
# (PYTHONPATH) it must.
SHOW_FILES = '''
import colorsys
import json
import os

import numpy as np
import tinypkg

print("FILES " + json.dumps({m.__name__: os.path.realpath(m.__file__) for m in (colorsys, np, tinypkg)}))
'''

REACH_GRADER = '''
import sys

import tinypkg

for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
    del sys.modules[name]
try:
    import grader.refdata
except ImportError as exc:
    print("SEALED", type(exc).__name__)
else:
    print("REACHED", grader.refdata.__file__)
'''

LAYOUT_SUBMISSIONS = {
    "good.py": SHOW_FILES + "\n\ndef attention(Q, K, V):\n    return tinypkg.attention(Q, K, V)\n",
    "unscaled.py": "import tinypkg\n\n\ndef attention(Q, K, V):\n    return tinypkg.attention(Q, K, V, scaled=False)\n",
    "reach.py": REACH_GRADER + "\n\ndef attention(Q, K, V):\n    return tinypkg.attention(Q, K, V)\n",
}

# Run by the layout's Python, as the grader's process of that layout: each submission graded by a
# fresh worker (runner.WORKER_BOOT) and by one forked from the fork server (forkserver.SERVER_BOOT),
# with where this process itself finds the modules good.py reports.
DRIVER = '''
import importlib.util, json, os, sys
from pathlib import Path

import grader
from grader.pipeline import grade_file
from grader.prepare import prepare
from grader.sandbox.forkserver import ForkServer

prepared = prepare()
paths = [Path(p) for p in sys.argv[1:]]


def row(report):
    return {"passed": report.passed, "status": report.worker_status, "output": report.output.text, "diagnoses": [d.name for d in report.diagnoses], "error": report.error}


found = {name: os.path.realpath(importlib.util.find_spec(name).origin) for name in ("colorsys", "numpy", "tinypkg")}
out = {"grader": os.path.realpath(grader.__file__), "parent": found, "modes": {}}
out["modes"]["fresh"] = {p.name: row(grade_file(p, prepared)) for p in paths}
server = ForkServer.start()
if server is not None:
    with server:
        out["modes"]["forked"] = {p.name: row(grade_file(p, prepared, forkserver=server)) for p in paths}
        out["spawned"] = server.spawned
print(json.dumps(out))
'''

# Each layout: how the grader and tinypkg are installed, and whether the folder holding them comes
# after the standard library on the grader's path (a site folder: a module named like a
# standard-library one there is never taken) or before it (PYTHONPATH: it is).
PACKAGE_LAYOUTS = ["venv", "system-site", "user", "target", "source-pythonpath", "source-cwd"]


class PackageLayout:
    def __init__(self, python: str, env: dict[str, str], cwd: Path, folder: Path, site_folder: bool) -> None:
        self.python, self.env, self.cwd, self.folder, self.site_folder = python, env, cwd, folder, site_folder


def _install_grader(folder: Path) -> None:
    """What ``pip install --target folder`` leaves of the grader: its package, copied (offline)."""
    import grader

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(Path(grader.__file__).resolve().parent, folder / "grader", ignore=shutil.ignore_patterns("__pycache__"))


def _install_neighbours(folder: Path, site_folder: bool) -> None:
    """tinypkg, and a colorsys.py that says where it is; in a site folder also an inspect.py that
    breaks whoever imports it (the worker imports inspect), as a PyPI package named like a
    standard-library module would: the grader never takes it, so the worker must not either."""
    (folder / "tinypkg").mkdir(parents=True, exist_ok=True)
    (folder / "tinypkg" / "__init__.py").write_text(TINYPKG)
    (folder / "colorsys.py").write_text("FROM_INSTALL_FOLDER = True\n")
    if site_folder:
        (folder / "inspect.py").write_text('raise ImportError("a module named like the standard library one, in site-packages")\n')


@pytest.fixture(scope="module")
def package_layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PackageLayout]:
    """The grader installed (a copy of its package, as pip leaves it) with tinypkg beside it, in
    each layout; numpy and the grader's dependencies come from this test process's site-packages
    (path lines of a .pth file, or PYTHONPATH), never from an editable install of the grader."""
    base = tmp_path_factory.mktemp("package-layouts")
    providers = _providers()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV")}
    deps_pth = "\n".join([*providers, ""])
    built: dict[str, PackageLayout] = {}

    # A venv, and a --system-site-packages venv: the grader in the venv's site-packages.
    for name, options in (("venv", ()), ("system-site", ("--system-site-packages",))):
        venv = _make_venv(base / name, *options)
        folder = _site_packages(venv)
        _install_grader(folder)
        _install_neighbours(folder, site_folder=True)
        (folder / "deps.pth").write_text(deps_pth)
        built[name] = PackageLayout(str(venv / "bin" / "python"), env, base, folder, site_folder=True)

    # pip install --user: the grader in the user site (PYTHONUSERBASE), which a
    # --system-site-packages venv reads (a plain venv never does).
    user_venv = _make_venv(base / "user-venv", "--system-site-packages")
    userbase = base / "userbase"
    user_env = {**env, "HOME": str(base / "home"), "PYTHONUSERBASE": str(userbase)}
    (base / "home").mkdir()
    found = subprocess.run([str(user_venv / "bin" / "python"), "-c", "import site; print(site.getusersitepackages())"], env=user_env, capture_output=True, text=True, timeout=60, check=True)
    user_site = Path(found.stdout.strip())
    _install_grader(user_site)
    _install_neighbours(user_site, site_folder=True)
    (user_site / "deps.pth").write_text(deps_pth)
    built["user"] = PackageLayout(str(user_venv / "bin" / "python"), user_env, base, user_site, site_folder=True)

    # pip install --target DIR with PYTHONPATH=DIR, and a source folder on PYTHONPATH, for a
    # bare venv: both before the standard library on the grader's path.
    bare = _make_venv(base / "bare")
    bare_python = str(bare / "bin" / "python")
    for name, folder in (("target", base / "target"), ("source-pythonpath", base / "source")):
        _install_grader(folder)
        _install_neighbours(folder, site_folder=False)
        built[name] = PackageLayout(bare_python, {**env, "PYTHONPATH": os.pathsep.join([str(folder), *providers])}, base, folder, site_folder=False)

    # Inside the source folder (`python -m grader` there): the current folder comes first for the
    # grader, and never reaches the worker (it may be the candidates' folder), so tinypkg is
    # installed elsewhere, on PYTHONPATH.
    checkout, deps = base / "checkout", base / "deps"
    _install_grader(checkout)
    _install_neighbours(deps, site_folder=False)
    built["source-cwd"] = PackageLayout(bare_python, {**env, "PYTHONPATH": os.pathsep.join([str(deps), *providers])}, checkout, deps, site_folder=False)
    return built


@pytest.mark.parametrize("name", PACKAGE_LAYOUTS)
def test_the_worker_imports_what_the_grader_imports_in_every_layout(package_layouts: dict[str, PackageLayout], name: str, tmp_path: Path) -> None:
    layout = package_layouts[name]
    subs = tmp_path / "subs"
    subs.mkdir()
    for file_name, source in LAYOUT_SUBMISSIONS.items():
        (subs / file_name).write_text(source)
    proc = subprocess.run(
        [layout.python, "-c", DRIVER, *(str(subs / f) for f in LAYOUT_SUBMISSIONS)],
        cwd=layout.cwd, env={**layout.env, "CI": "true"}, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    # The layout is the one meant: the grader from its install folder, tinypkg beside it, and
    # colorsys from the standard library unless the folder comes before it.
    assert result["grader"] == str((layout.folder if name != "source-cwd" else layout.cwd).resolve() / "grader" / "__init__.py")
    assert result["parent"]["tinypkg"] == str(layout.folder.resolve() / "tinypkg" / "__init__.py")
    assert (result["parent"]["colorsys"] == str(layout.folder.resolve() / "colorsys.py")) == (not layout.site_folder)
    assert set(result["modes"]) == {"fresh", "forked"} and result["spawned"] == len(LAYOUT_SUBMISSIONS), "the fork server did not start"
    for mode, reports in result["modes"].items():
        good, unscaled, reach = reports["good.py"], reports["unscaled.py"], reports["reach.py"]
        assert good["passed"] and good["status"] == "completed" and good["error"] is None, (mode, good)
        files = [line for line in good["output"].splitlines() if line.startswith("FILES ")]
        assert len(files) == 1 and json.loads(files[0][len("FILES "):]) == result["parent"], (mode, good["output"])
        # A wrong submission is still failed for its mistake, not for the environment.
        assert not unscaled["passed"] and unscaled["status"] == "completed" and unscaled["error"] is None, (mode, unscaled)
        assert "load-error" not in unscaled["diagnoses"] and "crash" not in unscaled["diagnoses"], (mode, unscaled)
        # The grader's own package stays out of reach, wherever it is installed.
        assert reach["passed"] and reach["output"].strip() == "SEALED ModuleNotFoundError", (mode, reach)


def test_the_sealed_package_cannot_be_imported_again_even_where_its_folder_is_readable(tmp_path: Path) -> None:
    """No filesystem layer here: the package's folder is readable and on sys.path (an installed
    copy), and dropping the modules from sys.modules does not bring it back."""
    target = tmp_path / "target"
    _install_grader(target)
    _install_neighbours(target, site_folder=False)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import grader.sandbox.worker as worker; worker.seal_grader_package()\n"
        "import tinypkg  # the folder's other packages stay importable\n"
        + REACH_GRADER
    )
    proc = subprocess.run([sys.executable, "-c", script, str(target)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "SEALED ModuleNotFoundError"
    # And before sealing, the same import would have worked: the test is not vacuous.
    unsealed = subprocess.run([sys.executable, "-c", script.replace("worker.seal_grader_package()", "pass"), str(target)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert unsealed.stdout.startswith("REACHED " + str(target)), unsealed.stdout + unsealed.stderr[-2000:]
