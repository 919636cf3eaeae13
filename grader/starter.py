"""`grade suite new`: a commented starter suite for a task author to edit.

The starter is valid as written (a test parses it), covers every check kind, and says in comments
what each key does. It never overwrites a file: it is written to a temporary file in the same
folder and linked into place, which fails if the name exists, so a second run (or a race with an
editor) cannot destroy an edited suite, and nobody ever sees a half-written file.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from grader.errors import UsageError

TEMPLATE = """\
# Suite for a take-home on scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V.
# Check it:                  grade suite check {file}
# Write its references:      grade references --regenerate --suite {file}
#                            (into the folder named by `references:` below; commit that folder)
# Grade with it:             grade --suite {file} submission.py     (or a notebook, or --candidate DIR)
version: 1
name: {name}

# The graded function. `entry` says where it is in a candidate's repository (grade --candidate DIR):
# a path relative to the checkout, and after the colon the function's name.
function: attention
# entry: src/model/attention.py:attention

# Which arrays the function receives: auto (torch tensors if the submission imports torch, jax arrays
# if it imports jax, numpy arrays otherwise), or numpy, torch or jax for everyone.
framework: auto

# Where the stored reference matrices live, relative to this file.
references: {references}

# Turn whole groups of checks on or off. values: weights and outputs; batch: batched inputs (off for a
# take-home that only asks for one sequence); masks: causal and padding masks (on when the task asks
# for a `mask` argument; the function then gets a boolean mask, True = keep, as its fourth argument,
# or by keyword when a parameter is called mask, attn_mask or attention_mask).
groups:
  values: true
  batch: true
  masks: false

limits:
  timeout: 10        # seconds of wall-clock time per submission (JAX gets 1 s more per input shape)
  memory_mb: 1024    # address space of the worker (counted after torch / jax is imported)
  output_kb: 64      # how much of what the submission prints is kept

tolerance:           # |actual - expected| <= atol + rtol * |expected|; float32 code passes these
  rtol: 1.0e-4
  atol: 1.0e-6

# Diagnoses that are warnings (reported, not failing) or off (not reported) in this task.
# severity:
#   scale-by-dk: warning

# Inputs are drawn from a seeded normal distribution. Sizes: tq queries, tk keys, dk key size,
# dv value size; batch lists leading axes (batch, heads). Keep T_q, T_k, d_k and d_v different so
# that no mix-up of two axes hides behind equal sizes.
cases:
  single:       {{seed: 1, shape: {{tq: 3, tk: 5, dk: 4, dv: 7}}}}
  head64:       {{seed: 2, shape: {{tq: 6, tk: 9, dk: 64, dv: 16}}}}
  batch:        {{seed: 3, shape: {{batch: [2], tq: 3, tk: 5, dk: 4, dv: 6}}}}
  batch-square: {{seed: 4, shape: {{batch: [4], tq: 4, tk: 4, dk: 4, dv: 4}}}}   # B = T = d: `.T` runs silently here
  multihead:    {{seed: 5, shape: {{batch: [2, 3], tq: 5, tk: 6, dk: 8, dv: 7}}}}
  # Masked cases. causal: query i keeps keys 0..i. padding: batch element b keeps its first n_b keys.
  causal:       {{seed: 6, shape: {{tq: 6, tk: 6, dk: 8, dv: 5}}, mask: causal}}
  padded:       {{seed: 7, shape: {{batch: [3], tq: 4, tk: 6, dk: 8, dv: 5}}, mask: {{padding: [6, 4, 2]}}}}

# The checks, in the order they run. A check whose `requires` did not pass is skipped. kind is one of
# load, shape, weights, outputs, batch, mask (default: the id). `enabled: false` turns one check off.
checks:
  - id: load
    title: the file imports and defines the function
    points: 1
  - id: shape
    title: one sequence gives a finite array of shape (T_q, d_v)
    case: single
    requires: [load]
    points: 1
  - id: weights
    title: attention weights match the reference (V = identity)
    cases: [single, head64]
    requires: [shape]
    points: 3
  - id: outputs
    title: outputs match the reference (random V)
    cases: [single, head64]
    requires: [shape]
    points: 2
  - id: batch
    title: batches match per element
    cases: [batch, batch-square, multihead]
    requires: [load]
    points: 2
  - id: masks
    kind: mask
    title: causal and padding masks are applied before the softmax
    cases: [causal, padded]
    requires: [load]
    points: 2
"""


def starter_text(path: Path) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-") or "my-task"
    return TEMPLATE.format(file=path.name, name=name, references=f"{path.stem}.reference")


def write_starter(path: Path) -> Path:
    """Write the starter suite to ``path``. Raises UsageError if it exists or cannot be written."""
    if path.exists() or path.is_symlink():
        raise UsageError(f"{path}: already exists; choose another name (an existing suite is never overwritten)")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{path}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(starter_text(path))
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, path)  # atomic, and fails if the name appeared meanwhile: never overwrites
    except FileExistsError:
        raise UsageError(f"{path}: already exists; choose another name (an existing suite is never overwritten)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return path
