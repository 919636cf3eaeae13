"""The `grade` command. Only this module imports click: it parses, calls the library, picks the
reporters and maps errors to exit codes (see grader.errors.ExitCode)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from grader import __version__
from grader.errors import ExitCode, GraderError, UsageError

FORMATS = ("text", "json")


class DefaultGroup(click.Group):
    """`grade PATH ...` grades; `grade references ...` and `grade explain ...` are subcommands."""

    default = "check"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] != "--version"):
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """Every failure becomes one line on stderr and an exit code; never a traceback."""
        try:
            code = super().main(args, prog_name or "grade", complete_var, standalone_mode=False, **extra)
        except GraderError as exc:
            fail(str(exc), exc.exit_code)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            fail(exc.format_message(), ExitCode.USAGE)
        except (click.Abort, KeyboardInterrupt):
            fail("interrupted; reports already written are kept", ExitCode.INTERRUPTED)
        except BrokenPipeError:
            sys.exit(int(ExitCode.OK))
        except Exception as exc:  # a bug of ours: one line and exit 3, never a traceback for the user
            fail(f"internal error: {type(exc).__name__}: {exc}", ExitCode.INTERNAL)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grade")
def cli() -> None:
    """Grade submissions of scaled dot-product attention."""


@cli.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="What to print on stdout.")
@click.option("--function", "function", metavar="NAME", help="Grade this function name instead of the suite's (default: attention).")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="A suite YAML file (default: the built-in suite).")
@click.option("--timeout", "timeout", type=click.FloatRange(min=0.1), metavar="SECONDS", help="Wall-clock limit per submission (default 10).")
@click.option("--memory", "memory", type=click.IntRange(min=64), metavar="MB", help="Memory limit per submission (default 1024).")
@click.option("--explain", "explain", metavar="NAME", help="Print the full explanation of a diagnosis (name or code) and exit.")
@click.option("--sandbox-info", "sandbox_info", is_flag=True, help="Print which isolation layers work on this machine and exit.")
@click.option("--strict-sandbox", "strict_sandbox", is_flag=True, help="Refuse to grade (exit 2) unless network, filesystem and process isolation are all active.")
@click.option("--candidate", "candidates", multiple=True, type=click.Path(path_type=Path), metavar="DIR", help="Grade DIR as one candidate's checkout: the suite's `entry`, else attention.py / solution.py in DIR.")
@click.option("--framework", "framework", type=click.Choice(("auto", "numpy", "torch", "jax")), help="Arrays the function receives (default: the suite's, auto = from its imports).")
def check_command(
    paths: tuple[Path, ...],
    fmt: str,
    function: str | None,
    suite_path: Path | None,
    timeout: float | None,
    memory: int | None,
    explain: str | None,
    sandbox_info: bool,
    strict_sandbox: bool,
    candidates: tuple[Path, ...],
    framework: str | None,
) -> None:
    """Grade submissions that define attention(Q, K, V): .py files, notebooks (.ipynb), or
    candidate checkouts (--candidate DIR).

    \b
    Exit codes: 0 every submission passed, 1 a submission failed, 2 usage error (bad path,
    option, suite or references), 3 internal error of the grader.
    Also: `grade explain NAME`, `grade references --verify | --regenerate`, `grade suite new PATH`.
    """
    if explain:
        _explain(explain)
        return
    if sandbox_info:
        _sandbox_info(fmt)
        return
    if not paths and not candidates:
        raise UsageError("no submission given; try: grade path/to/submission.py")
    from grader.api import Options, check_path, grade_file, prepare  # late: `grade --help` stays fast
    from grader.suite import load_suite

    for path in paths:
        check_path(path)
    _check_candidates(candidates)
    if strict_sandbox:
        _require_isolation()
    suite = load_suite(suite_path) if suite_path else None
    options = Options(function=function, timeout_s=timeout, memory_mb=memory, strict_sandbox=strict_sandbox, framework=framework)
    prepared = prepare(suite, options)
    reporter = _reporter(fmt, prepared.suite.name, prepared.suite.max_score)
    all_passed = True
    for report in [*(grade_file(p, prepared) for p in paths), *_grade_candidates(candidates, prepared)]:
        reporter.add(report)
        all_passed = all_passed and report.passed
    reporter.finish()
    sys.exit(ExitCode.OK if all_passed else ExitCode.FAILED)


# ---- issue 6: minimal `--candidate DIR` (issue 4's folder discovery replaces it at merge) ----


def _check_candidates(candidates: tuple[Path, ...]) -> None:
    for folder in candidates:
        if not folder.is_dir():
            raise UsageError(f"{folder}: --candidate needs a folder (a candidate's checkout)")


def _grade_candidates(candidates: tuple[Path, ...], prepared: Any) -> Any:
    from grader.api import grade_candidate_minimal

    return (grade_candidate_minimal(folder, prepared) for folder in candidates)


def _reporter(fmt: str, suite_name: str, max_score: float) -> Any:
    if fmt == "json":
        from grader.report.jsonfmt import JsonReporter

        return JsonReporter(sys.stdout, suite_name, max_score)
    from rich.console import Console

    from grader.report.text import TextReporter

    return TextReporter(Console(highlight=False))


def _sandbox_info(fmt: str) -> None:
    from grader.sandbox.isolation import GUARANTEES, missing_guarantees, probe_layers

    layers = probe_layers()
    missing = missing_guarantees(layers)
    if fmt == "json":
        import json

        doc = {
            "layers": [{"name": layer.name, "active": layer.active, "detail": layer.detail} for layer in layers],
            "isolated": {guarantee: guarantee not in missing for guarantee in GUARANTEES},
        }
        click.echo(json.dumps(doc, indent=2))
        return
    width = max(len(layer.name) for layer in layers)
    for layer in layers:
        click.echo(f"{'on ' if layer.active else 'off'}  {layer.name:<{width}}  {layer.detail}")
    for guarantee, layer_name in GUARANTEES.items():
        click.echo(f"{guarantee} isolation: {'yes' if guarantee not in missing else 'NO'} ({layer_name})")


def _require_isolation() -> None:
    """--strict-sandbox: probe before anything runs, and refuse with one line naming what is missing."""
    from grader.errors import SandboxUnavailable
    from grader.sandbox.isolation import missing_guarantees, probe_layers, why_missing

    layers = probe_layers()
    missing = missing_guarantees(layers)
    if missing:
        raise SandboxUnavailable(f"--strict-sandbox: no {' or '.join(missing)} isolation here: {why_missing(layers)}; see grade --sandbox-info")


def _explain(key: str) -> None:
    from grader.diagnosis.registry import RULES, lookup

    rule = lookup(key)
    if rule is None:
        raise UsageError(f"unknown diagnosis '{key}'; known: {', '.join(r.name for r in RULES)}")
    click.echo(rule.explain())


@cli.command("explain")
@click.argument("name")
def explain_command(name: str) -> None:
    """Print the full explanation of a diagnosis, by name (scale-by-dk) or code (S201)."""
    _explain(name)


@cli.command("references")
@click.option("--verify", "action", flag_value="verify", default=True, help="Check the stored references against their checksums (default).")
@click.option("--regenerate", "action", flag_value="regenerate", help="Write the references again from the float64 reference implementation.")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="The suite whose references to handle (default: the built-in suite).")
@click.option("--out", "out", type=click.Path(path_type=Path), help="With --regenerate: write into this folder instead.")
def references_command(action: str, suite_path: Path | None, out: Path | None) -> None:
    """Verify or regenerate the stored reference matrices (byte-identical on every run)."""
    from grader.refdata import load_default_suite, load_references, reference_dir_for, regenerate
    from grader.suite import load_suite

    suite = load_suite(suite_path) if suite_path else load_default_suite()
    if action == "regenerate":
        directory = out or reference_dir_for(suite)
        written = regenerate(suite, directory)
        click.echo(f"wrote {len(written)} files to {directory}")
    else:
        refs = load_references(suite)
        click.echo(f"{len(refs.cases)} cases verified in {refs.directory}")


@cli.group("suite")
def suite_group() -> None:
    """Write or check a suite: the YAML file that says what a take-home asks for."""


@suite_group.command("new")
@click.argument("path", type=click.Path(path_type=Path))
def suite_new_command(path: Path) -> None:
    """Write a commented starter suite to PATH (never overwrites an existing file)."""
    from grader.starter import write_starter

    write_starter(path)
    click.echo(f"wrote {path}; next: edit it, then `grade references --regenerate --suite {path}`")


@suite_group.command("check")
@click.argument("path", type=click.Path(path_type=Path))
def suite_check_command(path: Path) -> None:
    """Validate a suite file (exit 2 with the line and key of the first mistake)."""
    from grader.suite import load_suite

    suite = load_suite(path)
    off = f"; turned off: {', '.join(suite.disabled)}" if suite.disabled else ""
    click.echo(f"{path}: valid suite '{suite.name}': {len(suite.cases)} cases, {len(suite.checks)} checks, {suite.max_score:g} points{off}")


def fail(message: str, code: ExitCode) -> NoReturn:
    click.echo(f"grade: error: {message}", err=True)
    sys.exit(int(code))


def main() -> None:
    cli.main()
