"""GitHub: annotations that read as the bug in words, and the action's outputs.

An annotation's title is the rule's title; its message is the plain sentence, the fix in the
submission's own framework, the line of code, the figures, then the code to explain it with.
Everything a submission wrote stays one inert piece of one line. The action's step writes
``passed``, ``score``, ``max-score`` and the report paths to ``$GITHUB_OUTPUT`` whatever grade's
exit code, and exits with it; its script is run here as the runner runs it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, ROOT
from grader.diagnosis.model import Diagnosis, Location
from grader.diagnosis.registry import BY_NAME, RULES
from grader.observation import CapturedOutput
from grader.report.github import annotation_lines, classroom_result, escape_data, main, message, step_outputs
from grader.report.jsonfmt import report_dict
from grader.report.model import Report
from test_untrusted_text import assert_inert, runner_lines

HOSTILE = "oops\n::error file=x.py::forged%0A::warning::again ##[add-mask]secret \x1b[31m"


def _report(*diagnoses: Diagnosis, framework: str = "numpy", path: str = "cand/attention.py") -> Report:
    return Report(path, "attention", "s", False, 0.0, 15.0, (), diagnoses, CapturedOutput("", 0, 0), 0.1, "completed", extra={"framework": framework})


def _diagnosis(name: str, message: str = "effective scale 0.01563", location: Location | None = None) -> Diagnosis:
    return replace(Diagnosis.of(name, message), location=location)


def _parts(line: str) -> list[str]:
    """An annotation's message, one part per line as the runner shows it."""
    return line.split("::", 2)[2].split("%0A")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_every_rule_has_a_plain_title_and_sentence(rule) -> None:  # type: ignore[no-untyped-def]
    assert rule.title[0].isupper() or rule.title[0] in "`.", rule.title  # sentence case
    assert not rule.title.endswith(".") and len(rule.title) <= 64, rule.title  # a heading, not a paragraph
    assert rule.code not in rule.title and rule.name not in rule.title  # words, not the code
    assert rule.summary.endswith(".") and rule.summary[0].isupper(), rule.summary
    assert rule.title.lower() != rule.summary.rstrip(".").lower()


def test_titles_are_distinct() -> None:
    assert len({r.title for r in RULES}) == len(RULES)


def test_annotation_reads_most_important_first(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    lines = annotation_lines(report)
    titles = [re.search(r",title=([^:]*)::", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert titles == ["Scores divided by d_k instead of sqrt(d_k)", "Batched keys transposed over every axis (.T)"]
    first = _parts(lines[0])
    assert first[0] == BY_NAME["scale-by-dk"].summary
    assert first[1] == "Fix: scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)"
    assert first[2] == "Code: line 12: scores = Q @ K.T / Q.shape[-1]"
    assert first[3].startswith("Measured: effective scale 0.01563 where 1/sqrt(d_k) = 0.125")
    assert first[4] == "S201 scale-by-dk: grade explain S201"
    assert ",line=12," in lines[0]


@pytest.mark.parametrize(
    ("framework", "fix"),
    [
        ("torch", "Fix: scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"),
        ("jax", "Fix: scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1])"),
        ("numpy", "Fix: scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)"),
    ],
)
def test_fix_is_in_the_submissions_framework(framework: str, fix: str) -> None:
    (line,) = annotation_lines(_report(_diagnosis("scale-by-dk"), framework=framework))
    assert _parts(line)[1].startswith(fix)


def test_a_fix_already_in_its_framework_stays(grade_path) -> None:  # type: ignore[no-untyped-def]
    d = replace(_diagnosis("softmax-wrong-axis"), fix="weights = torch.softmax(scores, dim=-1)   # always name dim")
    assert "torch.softmax(scores, dim=-1)" in message(d, "torch")


def test_notebook_cell_is_named_in_the_message_not_as_a_file_line() -> None:
    d = _diagnosis("scale-by-dk", location=Location("cand/task.ipynb", 3, "s = q @ k.T / d", cell=2))
    (line,) = annotation_lines(_report(d, path="cand/task.ipynb"))
    assert ",line=" not in line.split("::", 2)[1]
    assert "Code: cell 2, line 3: s = q @ k.T / d" in _parts(line)


def test_candidate_copy_says_the_plain_words_once() -> None:
    rule = BY_NAME["scale-by-dk"]
    (line,) = annotation_lines(_report(_diagnosis("scale-by-dk", message=rule.title)))
    assert not any(part.startswith("Measured:") for part in _parts(line))


def test_everything_from_the_candidate_stays_inert() -> None:
    location = Location("cand/a\n::error::b.py", 4, "x = 1  # ::warning::hi %0A::error::x")
    report = replace(_report(_diagnosis("crash", message=HOSTILE, location=location)), error=HOSTILE)
    lines = annotation_lines(report)
    text = "\n".join(lines)
    assert len(runner_lines(text)) == len(lines) == 2  # one command a line, ours
    assert_inert(text, {"annotations"})
    assert all(re.match(r"::(error|warning) file=[^:\n]*::", line) for line in lines)
    assert "%250A" in text  # a candidate's "%0A" is shown as written, never decoded to a line break
    assert "##[" not in text and "\x1b" not in text


def test_escaping_is_the_runners() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"


# ---- the action's outputs ----


def _document(grade_path, *names: str) -> dict:  # type: ignore[no-untyped-def, type-arg]
    return {"submissions": [report_dict(grade_path(EXAMPLES / name)) for name in names]}


def test_outputs_of_a_failed_submission(grade_path) -> None:  # type: ignore[no-untyped-def]
    outputs = step_outputs(_document(grade_path, "seed_buggy.py"), 1)
    report = grade_path(EXAMPLES / "seed_buggy.py")
    assert outputs["passed"] == "false" and outputs["exit-code"] == "1"
    assert outputs["score"] == f"{report.score:g}" and outputs["max-score"] == f"{report.max_score:g}"
    result = json.loads(base64.b64decode(outputs["classroom-result"]))
    assert result["version"] == 1 and result["status"] == "fail" and result["max_score"] == report.max_score
    assert sum(t["score"] for t in result["tests"]) == report.score
    assert [t["status"] for t in result["tests"]] == ["pass" if c.passed else "fail" for c in report.checks]
    weights = next(t for t in result["tests"] if t["name"].startswith("weights:"))
    assert weights["message"].startswith("Scores divided by d_k instead of sqrt(d_k) (fix: ")  # the bug before the figures


def test_outputs_of_a_passing_submission(grade_path) -> None:  # type: ignore[no-untyped-def]
    outputs = step_outputs(_document(grade_path, "correct.py"), 0)
    top = f"{grade_path(EXAMPLES / 'correct.py').max_score:g}"
    assert outputs["passed"] == "true" and outputs["score"] == outputs["max-score"] == top
    assert json.loads(base64.b64decode(outputs["classroom-result"]))["status"] == "pass"


def test_outputs_when_grading_never_ran() -> None:
    outputs = step_outputs(None, 2)
    assert outputs["passed"] == "false" and outputs["score"] == outputs["max-score"] == "" and outputs["exit-code"] == "2"
    result = json.loads(base64.b64decode(outputs["classroom-result"]))
    assert result["status"] == "error" and result["max_score"] == 0


def test_outputs_are_single_lines_of_ours(grade_path) -> None:  # type: ignore[no-untyped-def]
    doc = _document(grade_path, "seed_buggy.py")
    doc["submissions"][0]["checks"][0]["summary"] = HOSTILE
    doc["submissions"][0]["path"] = "a\nscore=100"
    outputs = step_outputs(doc, 1)
    assert all(re.fullmatch(r"[\w.=+/-]*", value) for value in outputs.values())
    messages = [t["message"] for t in classroom_result(doc["submissions"], 1)["tests"]]
    assert_inert("\n".join(messages))
    assert all("\n" not in m for m in messages)


def test_main_reads_the_report_or_its_absence(tmp_path: Path, grade_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_document(grade_path, "correct.py")))
    top = f"{grade_path(EXAMPLES / 'correct.py').max_score:g}"
    assert main([str(path), "0"]) == 0
    assert f"passed=true\nscore={top}\nmax-score={top}\nexit-code=0\n" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json"), "2"]) == 0
    assert "passed=false\nscore=\n" in capsys.readouterr().out
    assert main(["only-one"]) == 2


def _grade_step() -> dict:  # type: ignore[type-arg]
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    return next(step for step in action["runs"]["steps"] if step.get("id") == "grade")


def test_action_declares_the_outputs_its_step_writes() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    outputs = action["outputs"]
    assert {"passed", "score", "max-score", "junit", "json"} <= set(outputs)
    for name, spec in outputs.items():
        assert spec["value"] == f"${{{{ steps.grade.outputs.{name} }}}}" and spec["description"]
    assert "${{ inputs." not in _grade_step()["run"]  # inputs reach the shell through env only


def test_every_python_of_the_action_is_isolated_from_the_checkout() -> None:
    """`python -m` puts the current folder (the candidate's checkout) first on the import path."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    runs = [step for step in action["runs"]["steps"] if "run" in step]
    calls = [line.strip() for step in runs for line in step["run"].splitlines() if re.match(r"\s*python3?\s", line)]
    assert calls and all(re.match(r"python3? -I -m ", call) for call in calls), calls
    install = next(step for step in runs if "pip install" in step["run"])
    assert install["working-directory"] == "${{ runner.temp }}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="the action's step is a bash script")
def test_a_checkout_cannot_shadow_the_modules_of_the_action_step(tmp_path: Path) -> None:
    """A json.py and a grader/ in the checkout, where the runner starts the step: neither runs."""
    checkout = tmp_path / "candidate"
    checkout.mkdir()
    shutil.copy(EXAMPLES / "correct.py", checkout / "attention.py")
    marker = tmp_path / "shadow-ran"
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (checkout / "json.py").write_text(payload)
    (checkout / "grader").mkdir()
    (checkout / "grader" / "__init__.py").write_text(payload)
    code, outputs, _ = _run_step(tmp_path, checkout, cwd=checkout)
    assert not marker.exists(), marker.read_text()
    assert code == 0 and outputs["passed"] == "true" and outputs["exit-code"] == "0"


def _run_step(tmp_path: Path, checkout: Path, args: str = "", cwd: Path | None = None) -> tuple[int, dict[str, str], str]:
    """The Grade step's script, run by bash as the runner runs it, with this Python's `grade`."""
    step = _grade_step()
    outputs = tmp_path / "github_output"
    outputs.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update({key: str(value) for key, value in step["env"].items()})  # the defaults are replaced below
    env.update(
        GRADE_PATH=str(checkout), GRADE_SUBMISSION_FILE="", GRADE_JUNIT=str(tmp_path / "junit.xml"), GRADE_JSON="", GRADE_ARGS=args,
        GITHUB_OUTPUT=str(outputs), GITHUB_ACTIONS="true", RUNNER_TEMP=str(tmp_path), CI="true",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT),
    )
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd or tmp_path, env=env, capture_output=True, text=True, timeout=300)
    values = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    return proc.returncode, values, proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="the action's step is a bash script")
def test_action_step_writes_outputs_and_keeps_the_exit_code(tmp_path: Path) -> None:
    checkout = tmp_path / "candidate"
    checkout.mkdir()
    shutil.copy(EXAMPLES / "seed_buggy.py", checkout / "attention.py")
    code, outputs, stdout = _run_step(tmp_path, checkout)
    assert code == 1  # the job fails on a failed check
    assert outputs["json"] == str(tmp_path / "grader-report.json")
    (sub,) = json.loads(Path(outputs["json"]).read_text())["submissions"]
    assert sub["score"] < sub["max_score"]
    assert outputs["passed"] == "false" and outputs["exit-code"] == "1"
    assert outputs["score"] == f"{sub['score']:g}" and outputs["max-score"] == f"{sub['max_score']:g}"
    assert outputs["junit"] == str(tmp_path / "junit.xml") and (tmp_path / "junit.xml").is_file()
    assert "title=Scores divided by d_k instead of sqrt(d_k)" in stdout  # the annotations, under Actions


@pytest.mark.skipif(shutil.which("bash") is None, reason="the action's step is a bash script")
def test_action_step_outputs_when_grade_refuses(tmp_path: Path) -> None:
    checkout = tmp_path / "candidate"
    checkout.mkdir()
    shutil.copy(EXAMPLES / "correct.py", checkout / "attention.py")
    (tmp_path / "grader-report.json").write_text('{"submissions": [{"score": 15, "max_score": 15}]}')  # a stale report
    code, outputs, _ = _run_step(tmp_path, checkout, args="--timeout 0")
    assert code == 2
    assert outputs["passed"] == "false" and outputs["score"] == "" and outputs["exit-code"] == "2"
