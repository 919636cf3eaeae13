"""Finding one's way: the help in groups with examples, every command listed with its purpose and
nothing cut short; `grade explain --list`; messages that name what the user gave (the graded
function, the custom suite) and the exact command that fixes the set-up."""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest import EXAMPLES, ROOT
from grader.cli import OPTION_GROUPS, check_command, cli
from grader.diagnosis.registry import RULES
from grader.refdata import load_default_suite, load_references, regenerate_command
from grader.suite import load_suite

ANSI = re.compile(r"\x1b\[[0-9;]*m")
GROUPS = ("Input", "Checks and limits", "Output", "Cache", "Sandbox")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def panels(text: str) -> dict[str, str]:
    """The help's panels by title: ``╭─ Title ───╮`` to ``╰───╯``."""
    found = re.findall(r"╭─ (.+?) ─+╮\n(.*?)╰─+╯", text, flags=re.S)
    return {title: body for title, body in found}


def options_in(body: str) -> set[str]:
    return set(re.findall(r"│ (--[a-z][a-z-]*)", body))


@pytest.fixture(scope="module")
def top() -> str:
    code, out, err = invoke("--help")
    assert code == 0 and err == ""
    return out


def test_top_help_is_grading_with_examples_and_exit_codes(top: str) -> None:
    assert "Usage: grade [OPTIONS] [PATHS]... | COMMAND [ARGS]..." in top
    assert "`grade PATHS` is short for `grade check PATHS`" in top
    assert "Examples:" in top and "grade --candidate ." in top and "grade explain --list" in top
    assert "Exit codes: 0 every submission passed" in top
    assert not ANSI.search(top)  # plain when not a terminal
    assert invoke("-h")[1] == top


def test_options_are_in_their_groups(top: str) -> None:
    shown = panels(top)
    assert list(shown)[: len(GROUPS)] == list(GROUPS)
    for group in OPTION_GROUPS:
        existing = {o for p in check_command.params for o in getattr(p, "opts", []) if o in group["options"]}
        assert existing and options_in(shown[group["name"]]) == existing, group["name"]
    # The options other parts of the grader added are placed, not left to a catch-all panel.
    for option in ("--verbose", "--audience", "--feedback", "--roster"):
        assert option in options_in(shown["Output"])
    assert "--shard" in options_in(shown["Input"])


def test_every_option_of_grading_is_shown(top: str) -> None:
    shown = set().union(*(options_in(body) for body in panels(top).values()))
    every = {o for p in check_command.params if isinstance(p, click.Option) and not p.hidden for o in p.opts if o.startswith("--")}
    assert every <= shown


def test_every_command_is_listed_with_its_purpose(top: str) -> None:
    commands = panels(top)["Commands"]
    for name, command in cli.commands.items():
        if command.hidden:
            continue
        purpose = command.get_short_help_str(limit=10_000)
        assert re.search(rf"│ {name} +{re.escape(purpose.split()[0])}", commands), name
    assert "(the default command)" in " ".join(commands.replace("│", " ").split())  # `grade check`, what `grade PATH` runs


def _every_help() -> list[list[str]]:
    pages = [["--help"]]
    for name, command in cli.commands.items():
        pages.append([name, "--help"])
        if isinstance(command, click.Group):
            pages.extend([name, sub, "--help"] for sub in command.commands)
    return pages


@pytest.mark.parametrize("args", _every_help(), ids=" ".join)
def test_no_description_is_cut_short(args: list[str]) -> None:
    code, out, _ = invoke(*args)
    assert code == 0 and "Usage:" in out
    assert "..." not in re.sub(r"\[[A-Z]+\]\.\.\.", "", out), out  # only the usage's "[PATHS]..." of repeated arguments


def test_subcommand_groups_list_their_commands() -> None:
    code, out, _ = invoke("suite", "--help")
    assert code == 0
    assert "│ new " in out and "│ check " in out
    code, out, _ = invoke("suite")  # no command: the same help, as a usage error
    assert code == 2 and "│ new " in out


def test_grading_help_has_the_same_groups() -> None:
    code, out, _ = invoke("check", "--help")
    assert code == 0 and "Usage: grade check [OPTIONS] [PATHS]..." in out
    assert list(panels(out))[: len(GROUPS)] == list(GROUPS)


# ---- grade explain --list ----


def test_explain_list_prints_every_diagnosis_on_one_plain_line() -> None:
    code, out, _ = invoke("explain", "--list")
    assert code == 0 and not ANSI.search(out)
    lines = out.splitlines()
    assert len(lines) == len(RULES)
    for line, rule in zip(lines, RULES):
        assert re.fullmatch(rf"{rule.code}  {re.escape(rule.name)} +{re.escape(rule.title)}( \(warning\))?", line), line
    assert invoke("explain")[1] == out  # without a name: the list


def test_explain_list_is_a_table_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from grader import cli as cli_module

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(cli_module.sys, "stdout", screen)
    monkeypatch.setenv("COLUMNS", "120")
    cli_module._explain_list()
    text = ANSI.sub("", screen.getvalue())
    assert text.splitlines()[0].split() == ["code", "name", "what", "it", "is"]
    for rule in RULES:
        assert re.search(rf"{rule.code} +{re.escape(rule.name)} +{re.escape(rule.title)}", text), rule.code


def test_unknown_diagnosis_points_at_the_list() -> None:
    code, _, err = invoke("explain", "scale-by-pi")
    assert code == 2 and err == "grade: error: unknown diagnosis 'scale-by-pi'; `grade explain --list` lists every diagnosis\n"


# ---- messages that name what was given ----


def test_function_missing_names_the_graded_function() -> None:
    code, out, _ = invoke("--format", "json", "--function", "my_attention", str(EXAMPLES / "correct.py"))
    assert code == 1
    sub = json.loads(out)["submissions"][0]
    (d,) = sub["diagnoses"]
    assert d["name"] == "function-missing"
    assert "'my_attention'" in d["message"]
    assert "def my_attention(Q, K, V)" in d["fix"] and "def attention(" not in d["fix"]
    load = next(c for c in sub["checks"] if c["id"] == "load")
    assert "'my_attention'" in load["summary"]


def test_function_missing_text_report_names_it_too() -> None:
    code, out, _ = invoke("--function", "my_attention", str(EXAMPLES / "correct.py"))
    assert code == 1
    assert "my_attention" in out and "def attention(" not in out


def test_default_suite_references_hint_has_no_suite() -> None:
    assert regenerate_command(load_default_suite()) == "grade references --regenerate"


def test_custom_suite_without_references_names_the_exact_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("suite", "new", "my task.yaml")[0] == 0
    sub = tmp_path / "sub.py"
    shutil.copy(EXAMPLES / "correct.py", sub)
    code, _, err = invoke("--suite", "my task.yaml", str(sub))
    assert code == 2 and err.count("\n") == 1
    hint = "grade references --regenerate --suite 'my task.yaml'"
    assert err.rstrip().endswith(f"regenerate them with: {hint}"), err
    # The command works as it is written: then the suite grades.
    args = shlex.split(hint)
    assert args[0] == "grade" and invoke(*args[1:])[0] == 0
    assert invoke("--suite", "my task.yaml", str(sub))[0] == 0


def test_references_of_another_folder_name_it_with_out(tmp_path: Path) -> None:
    suite = load_suite(ROOT / "grader" / "fixtures" / "suite.yaml")
    from grader.errors import ReferenceDataError

    with pytest.raises(ReferenceDataError, match=re.escape(f"regenerate them with: grade references --regenerate --out {tmp_path}")):
        load_references(suite, tmp_path)


def test_a_suite_of_ones_own_never_regenerates_into_the_graders_references(tmp_path: Path) -> None:
    """Without a `references:` folder a suite reads the built-in folder; regenerating it there
    would replace the grader's own references and delete the other cases' files."""
    from grader.refdata import default_reference_dir

    own = tmp_path / "task.yaml"
    text = (ROOT / "grader" / "fixtures" / "suite.yaml").read_text()
    own.write_text("\n".join(line for line in text.splitlines() if not line.startswith("references:")) + "\n")
    before = {p.name: p.read_bytes() for p in default_reference_dir().iterdir() if p.is_file()}
    code, _, err = invoke("references", "--regenerate", "--suite", str(own))
    assert code == 2 and err.count("\n") == 1 and "references: FOLDER" in err, err
    after = {p.name: p.read_bytes() for p in default_reference_dir().iterdir() if p.is_file()}
    assert after == before
    # The hint of a suite that has no references names a folder of its own, and it works.
    hint = regenerate_command(load_suite(own))
    assert "--out" in hint and str(default_reference_dir()) not in hint
    assert invoke(*shlex.split(hint)[1:])[0] == 0
    assert before == {p.name: p.read_bytes() for p in default_reference_dir().iterdir() if p.is_file()}
