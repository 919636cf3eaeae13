"""Probes: the named input triples the worker calls the submission on.

Two probes per case:

* ``CASE/values``: the stored Q, K, V; the output is compared with the stored output;
* ``CASE/identity``: the stored Q and K with V = the identity of size T_k. Then
  ``weights @ V = weights``, so the output *is* the attention weight matrix: the weights become
  observable through the public signature, with no hook into the submission.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grader.refdata import ReferenceSet
from grader.suite import Suite


@dataclass(frozen=True)
class Probe:
    name: str
    case: str
    kind: str  # "values", "identity", ...
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    repeat: int = 1
    return_inputs: bool = False
    mask: np.ndarray | None = None  # issue 6: a boolean mask (True = keep) of shape (..., T_q, T_k)


def identity_values(tk: int, batch: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(np.eye(tk), batch + (tk, tk)).copy()


def probe_name(case: str, kind: str) -> str:
    return f"{case}/{kind}"


def build_probes(suite: Suite, refs: ReferenceSet) -> list[Probe]:
    """Every probe the suite's checks need, each once, in the order of the checks."""
    probes: dict[str, Probe] = {}
    for check in suite.checks:
        for case_name in check.cases:
            data = refs.cases[case_name]
            if check.kind == "mask":  # issue 6: masked cases have their own probes
                from grader.masks import mask_probes

                for probe in mask_probes(data):
                    probes.setdefault(probe.name, probe)
                continue
            for kind, V in (("values", data.V), ("identity", identity_values(data.case.shape.tk, data.case.shape.batch))):
                name = probe_name(case_name, kind)
                if name not in probes:
                    probes[name] = Probe(name=name, case=case_name, kind=kind, Q=data.Q, K=data.K, V=V)
    return list(probes.values())
