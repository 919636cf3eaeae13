"""The CI documentation stays true: the action and the snippets parse, and every `grade` option
they use exists; the README's format table names exactly the formats there are."""

from __future__ import annotations

import re

import yaml

from conftest import ROOT
from grader.cli import check_command
from grader.report.base import FORMATS

CI_DOC = (ROOT / "docs" / "ci.md").read_text()
OPTIONS = {opt for param in check_command.params for opt in getattr(param, "opts", [])}


def _grade_options(text: str) -> set[str]:
    used = set()
    for line in text.splitlines():
        if re.search(r"(^|\s)grade\s", line.strip()):
            used.update(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", line.split("grade", 1)[1]))
    return used


def test_action_is_a_composite_that_grades_the_checkout() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    script = "\n".join(step.get("run", "") for step in action["runs"]["steps"])
    assert "--candidate" in script
    used = set(re.findall(r"\((--[a-z-]+)", script)) | set(re.findall(r"\+=\((--[a-z-]+)", script))
    assert used and used <= OPTIONS
    # Inputs reach the shell through env, never pasted into the script.
    assert "${{ inputs." not in script


def test_ci_snippets_parse_and_use_real_options() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", CI_DOC, flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        yaml.safe_load(block)
    assert _grade_options(CI_DOC) <= OPTIONS
    assert "--candidate" in _grade_options(CI_DOC)


def test_readme_format_table_matches_the_reporters() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Report formats", 1)[1].split("\n\n", 3)[2]
    rows = re.findall(r"^\| ([a-z]+) \| ", table, flags=re.M)
    assert tuple(rows[1:]) == FORMATS  # after the header row


def test_cli_format_choices_are_the_reporters() -> None:
    from grader.cli import FORMATS as CLI_FORMATS

    assert CLI_FORMATS == FORMATS
