"""The docs stay honest: the README's tables match the registry and the suite, its commands are
the ones CI runs, and every diagnosis has an example that produces it."""

from __future__ import annotations

import re

import yaml

from conftest import CORPUS, EXAMPLES, ROOT
from grader.diagnosis.registry import RULES
from grader.refdata import load_default_suite

README = (ROOT / "README.md").read_text()


def test_readme_diagnosis_table_matches_the_registry() -> None:
    rows = re.findall(r"^\| ([A-Z]\d{3}) \| `([a-z0-9-]+)` \|", README, flags=re.M)
    assert rows == [(r.code, r.name) for r in RULES]


def test_readme_check_table_matches_the_default_suite() -> None:
    ids = re.findall(r"^\| `([a-z0-9-]+)` \| ", README, flags=re.M)
    assert ids == [c.id for c in load_default_suite().checks]


def test_ci_runs_the_readme_commands() -> None:
    block = README.split("## Set-up: two commands", 1)[1].split("```", 2)[1]
    commands = [line for line in block.splitlines() if line and not line.startswith(("#", "sh"))]
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    for command in commands:
        for part in command.split(" && "):
            assert part.strip() in ci, part


def test_every_diagnosis_has_an_example() -> None:
    labelled = yaml.safe_load((EXAMPLES / "labels.yaml").read_text())
    tables = [yaml.safe_load(path.read_text()) for path in sorted(CORPUS.glob("**/expected.yaml"))]  # per-form tables too
    wants = [*labelled.values(), *(w for t in tables for w in t.values())]
    produced = {n for want in wants for n in [*want["diagnoses"], *want.get("warnings", [])]}
    missing = [r.name for r in RULES if r.name not in produced and r.name != "values-mismatch"]
    assert not missing


def test_rules_have_unique_codes_and_kebab_names() -> None:
    assert len({r.code for r in RULES}) == len(RULES) == len({r.name for r in RULES})
    for rule in RULES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
        assert all([rule.title, rule.fix, rule.what, rule.why, rule.example, rule.instead])
