# Looks for the grader's stored references (and its reference implementation) and replays them.
# Bounded: the search stops after 3 s or 50 000 folder entries. Prints FOUND for anything it got.
import glob
import importlib
import os
import sys
import time

import numpy as np

from _hostile import attempt, report, wrong_answer

STOLEN = {}  # shape of the expected output -> the stored output


def steal(path):
    array = np.load(path)
    STOLEN[array.shape] = array
    return path


def grader_folders():
    folders = []
    grader = sys.modules.get("grader")
    if grader is not None and getattr(grader, "__file__", None):
        package = os.path.dirname(grader.__file__)
        folders += [os.path.join(package, "reference"), os.path.join(os.path.dirname(package), "reference")]
    return folders


def search(roots, deadline, budget):
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ("/proc", "/sys", "/dev")]
            budget -= len(dirs) + len(files)
            if time.monotonic() > deadline or budget < 0:
                return
            if "manifest.json" in files and any(f.endswith(".output.npy") for f in files):
                yield folder


for folder in grader_folders():
    attempt(f"list {folder}", lambda folder=folder: os.listdir(folder))
    for path in sorted(glob.glob(os.path.join(folder, "*.output.npy"))):
        attempt(f"read {path}", lambda path=path: steal(path))
for module in ("grader.refdata", "grader.attention", "grader.reference"):
    attempt(f"import {module}", lambda module=module: importlib.import_module(module).__name__)
attempt("grader.attention in memory", lambda: sys.modules["grader.attention"].__name__)
attempt("grader.refdata in memory", lambda: sys.modules["grader.refdata"].__name__)
started = time.monotonic()
roots = [os.path.dirname(os.path.dirname(f)) for f in grader_folders()[:1]] + [os.path.expanduser("~"), "/"]
for folder in search(roots, started + 3.0, 50_000):
    for path in sorted(glob.glob(os.path.join(folder, "*.output.npy"))):
        attempt(f"read {path}", lambda path=path: steal(path))
report("stolen outputs", len(STOLEN))
if STOLEN:
    print("FOUND stored outputs", flush=True)


def attention(Q, K, V):
    shape = Q.shape[:-1] + (V.shape[-1],)
    if shape in STOLEN:
        return STOLEN[shape]
    try:  # the grader's own reference implementation, if it could be had
        return importlib.import_module("grader.attention").attention(Q, K, V)
    except BaseException:  # noqa: BLE001
        return wrong_answer(Q, K, V)
