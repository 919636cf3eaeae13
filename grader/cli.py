"""The `grade` command. Only this module imports click: it parses, calls the library, picks the
reporters and maps errors to exit codes (see grader.errors.ExitCode)."""

from __future__ import annotations

import json
import os
import secrets
import sys
from contextlib import closing
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text

from grader import __version__
from grader.cache import ResultCache
from grader.diagnosis.registry import RULES, lookup
from grader.discover import Rule, discover
from grader.errors import ExitCode, GraderEnvironmentError, GraderError, SandboxUnavailable, UsageError
from grader.pipeline import is_environment_error, run
from grader.prepare import Options, prepare
from grader.refdata import load_default_suite, load_references, reference_dir_for, regenerate
from grader.report.files import OutputSpec, check_writable, parse_output, render_document, write_report_file
from grader.report.github import GithubReporter
from grader.report.markdown import render
from grader.report.model import Report
from grader.report import untrusted
from grader.report.registry import FORMATS, Reporter, RunInfo, make_reporter
from grader.report.summary import RunSummary
from grader.report.text import summary_table
from grader.sandbox.forkserver import ForkServer
from grader.sandbox import isolation
from grader.slots import default_jobs
from grader.starter import write_starter
from grader.suite import load_suite


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
@click.option("--candidate", is_flag=True, help="Each PATH is one candidate's checkout, graded as one submission (a CI step in a candidate's repository: grade --candidate .).")
@click.option("--submission-file", "pattern", metavar="GLOB", help="In a candidate's checkout, grade the one file whose relative path matches GLOB (default: the file that defines the function).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="What to print on stdout.")
@click.option("--output", "-o", "outputs", multiple=True, metavar="FMT=PATH", help="Also write a report file in FMT (repeatable), e.g. -o junit=report.xml.")
@click.option("--jobs", "-j", "jobs", type=click.IntRange(min=1), metavar="N", help="Submissions graded at once: at most N workers run at a time (default: the number of CPUs).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar; the text report gives one line per submission.")
@click.option("--no-cache", "no_cache", is_flag=True, help="Neither reuse nor store cached results.")
@click.option("--cache-dir", "cache_dir", type=click.Path(path_type=Path), envvar="GRADER_CACHE_DIR", show_envvar=True, help="Where results are cached (default: ~/.cache/attention-grader).")
@click.option("--function", "function", metavar="NAME", help="Grade this function name instead of the suite's (default: attention).")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="A suite YAML file (default: the built-in suite).")
@click.option("--timeout", "timeout", type=click.FloatRange(min=0.1), metavar="SECONDS", help="Wall-clock limit per submission (default 10).")
@click.option("--memory", "memory", type=click.IntRange(min=64), metavar="MB", help="Memory limit per submission (default 1024).")
@click.option("--explain", "explain", metavar="NAME", help="Print the full explanation of a diagnosis (name or code) and exit.")
@click.option("--sandbox-info", "sandbox_info", is_flag=True, help="Print which isolation layers work on this machine and exit.")
@click.option("--strict-sandbox", "strict_sandbox", is_flag=True, help="Refuse to grade (exit 2) unless network, filesystem and process isolation are all active.")
@click.option("--framework", "framework", type=click.Choice(("auto", "numpy", "torch", "jax")), help="Arrays the function receives (default: the suite's, auto = from its imports).")
def check_command(
    paths: tuple[Path, ...],
    candidate: bool,
    pattern: str | None,
    fmt: str,
    outputs: tuple[str, ...],
    jobs: int | None,
    quiet: bool,
    no_cache: bool,
    cache_dir: Path | None,
    function: str | None,
    suite_path: Path | None,
    timeout: float | None,
    memory: int | None,
    explain: str | None,
    sandbox_info: bool,
    strict_sandbox: bool,
    framework: str | None,
) -> None:
    """Grade submissions of attention(Q, K, V): files (.py, .ipynb), folders of them, candidates'
    checkouts.

    \b
    grade sub.py                     one file
    grade submissions/               each .py file in it, and each subfolder as one candidate
    grade --candidate .              this checkout as one candidate (CI)
    grade -j 8 -o junit=report.xml submissions/

    \b
    Exit codes: 0 every submission passed, 1 a submission failed (or could not be graded),
    2 usage error (bad path, option, suite, references, output file) or a submission not graded
    because the worker cannot import what the grader's Python can, 3 internal error,
    130 interrupted (what was graded is kept and written).
    Also: `grade explain NAME`, `grade references --verify | --regenerate`, `grade suite new PATH`.
    """
    if explain:
        _explain(explain)
        return
    if sandbox_info:
        _sandbox_info(fmt)
        return
    if not paths:
        raise UsageError("no submission given; try: grade path/to/submission.py")
    specs = [parse_output(text) for text in outputs]
    for spec in specs:
        check_writable(spec.path)  # before grading: a bad output path must not cost a whole batch
    options = Options(function=function, timeout_s=timeout, memory_mb=memory, strict_sandbox=strict_sandbox, framework=framework)
    _tolerant_output()
    commands = _StoppedCommands.begin(fmt)  # before anything reads a candidate's files
    # Started before the suite and references load: the server's own start (numpy's import)
    # runs meanwhile. None where this system cannot have one: workers then start fresh.
    server = ForkServer.start()
    try:
        code = _grade(list(paths), specs, server, options, candidate=candidate, pattern=pattern, fmt=fmt, jobs=jobs, quiet=quiet, no_cache=no_cache, cache_dir=cache_dir, suite_path=suite_path, commands=commands)
    finally:
        commands.resume()  # also when grading failed: the runner must not stay deaf to the next steps
        if server is not None:
            server.close()
    sys.exit(code)


def _grade(paths: list[Path], specs: list[OutputSpec], server: ForkServer | None, options: Options, *, candidate: bool, pattern: str | None, fmt: str, jobs: int | None, quiet: bool, no_cache: bool, cache_dir: Path | None, suite_path: Path | None, commands: _StoppedCommands) -> ExitCode:
    suite = load_suite(suite_path) if suite_path else load_default_suite()
    submissions = discover(paths, Rule(function=options.function or suite.function, pattern=pattern, entry=suite.entry), candidate=candidate)
    if options.strict_sandbox:
        _require_isolation()
    prepared = prepare(suite, options)
    cache = None if no_cache else ResultCache.for_run(prepared, cache_dir)
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    info = RunInfo(prepared.suite.name, prepared.suite.max_score, quiet=quiet)
    stdout: Reporter = make_reporter(fmt, sys.stdout, info)  # type: ignore[arg-type]

    bar = None if quiet or os.environ.get("CI") or not sys.stdout.isatty() else _progress(len(submissions))
    graded: dict[int, Report] = {}  # by the submission's index in the discovered list
    failures = 0
    interrupted = False
    if bar is not None:
        bar.start()
    try:
        with closing(run(submissions, prepared, jobs=jobs or default_jobs(), cache=cache, forkserver=server)) as results:
            for index, report in results:
                graded[index] = report
                failures += not report.passed
                if stdout.streaming:
                    stdout.add(report)
                if bar is not None:
                    bar.update(bar.task_ids[0], advance=1, failed=failures)
    except KeyboardInterrupt:  # closing the run stopped its workers; what was graded is kept
        interrupted = True
    finally:
        if bar is not None:
            bar.stop()
    reports = [graded[i] for i in sorted(graded)]
    documents: dict[str, str] = {}

    def document(name: str) -> str:
        """A whole document, rendered once however many places it goes to (stdout, -o files)."""
        if name not in documents:
            documents[name] = render_document(name, reports, info)  # type: ignore[arg-type]
        return documents[name]

    if stdout.streaming:
        stdout.finish()
    else:
        sys.stdout.write(document(fmt))
    if fmt != "text" and not quiet and len(reports) > 1 and sys.stderr.isatty():
        Console(stderr=True, emoji=False).print(summary_table(RunSummary.of(reports)))
    commands.resume()
    if in_actions:
        _github_actions(reports, info, fmt)
    for spec in specs:
        write_report_file(spec.path, document(spec.fmt))
    if cache is not None and cache.problem:
        click.echo(f"grade: warning: {inert(cache.problem)}", err=True)
    # Not graded because of the grader's own environment (the worker could not import what the
    # grader's Python can): the report says so in one line; exit 2, as for a bad installation.
    environment = [r.error for r in reports if is_environment_error(r) and r.error]
    if fmt != "text":
        for message in dict.fromkeys(environment):
            click.echo(f"grade: error: {inert(message)}", err=True)
    if interrupted:
        click.echo(f"grade: interrupted: {len(reports)} of {len(submissions)} submissions graded; their results are kept", err=True)
        return ExitCode.INTERRUPTED
    if environment:
        return GraderEnvironmentError.exit_code
    return ExitCode.OK if all(r.passed for r in reports) else ExitCode.FAILED


class _StoppedCommands:
    """Under GitHub Actions, with the text report, nothing printed may act as a workflow command
    (a candidate's path or printed text could hold "::error" or "##[add-mask]"): the runner's
    stop-commands switch covers everything printed from the first line, before the suite loads
    or a candidate's file is read, to ``resume`` (then the annotations, ours, follow). No worker
    holds the token: the fork server and the workers are fresh interpreters, never forks of the
    grader. Other formats leave stdout an exact document, made inert by its reporter
    (grader.report.untrusted)."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    @classmethod
    def begin(cls, fmt: str) -> _StoppedCommands:
        if os.environ.get("GITHUB_ACTIONS") != "true" or fmt != "text":
            return cls(None)
        token = secrets.token_hex(16)
        click.echo(f"::stop-commands::{token}")
        return cls(token)

    def resume(self) -> None:
        if self.token is not None:
            click.echo(f"::{self.token}::")
            self.token = None


def _tolerant_output() -> None:
    """A character the terminal's encoding cannot write (a lone surrogate from a submission the
    reporters missed, a heat map glyph under an ASCII locale) is written as an escape: one
    submission must never stop the report of the others."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def inert(text: str) -> str:
    """A message for stderr that may name a candidate's file: one line, controls escaped, no
    workflow command."""
    return untrusted.no_commands(untrusted.line(text))


def _github_actions(reports: list[Report], info: RunInfo, fmt: str) -> None:
    """Annotations on stdout (unless that is the chosen format) and the job summary."""
    if fmt != "github":
        # After a document on stdout (json, junit, ...) they go to stderr, which the runner reads too.
        annotations = GithubReporter(sys.stdout if fmt == "text" else sys.stderr, info)
        for report in reports:
            annotations.add(report)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8", errors="replace") as handle:
                handle.write(render(reports, info))
        except OSError as exc:
            click.echo(f"grade: warning: {summary}: cannot write the job summary: {exc.strerror}", err=True)


class RateColumn(ProgressColumn):
    """Submissions per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f}/s" if speed else "-/s", style="dim")


def _progress(total: int) -> Progress:
    """The progress bar: done / total, failures so far, rate and time left (terminals only)."""
    progress = Progress(
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        RateColumn(),
        TimeRemainingColumn(),
        transient=True,
    )
    progress.add_task("grading", total=total, failed=0)
    return progress


def _sandbox_info(fmt: str) -> None:
    layers = isolation.probe_layers()
    missing = isolation.missing_guarantees(layers)
    if fmt == "json":
        doc = {
            "layers": [{"name": layer.name, "active": layer.active, "detail": layer.detail} for layer in layers],
            "isolated": {guarantee: guarantee not in missing for guarantee in isolation.GUARANTEES},
        }
        click.echo(json.dumps(doc, indent=2))
        return
    width = max(len(layer.name) for layer in layers)
    for layer in layers:
        click.echo(f"{'on ' if layer.active else 'off'}  {layer.name:<{width}}  {layer.detail}")
    for guarantee, layer_name in isolation.GUARANTEES.items():
        click.echo(f"{guarantee} isolation: {'yes' if guarantee not in missing else 'NO'} ({layer_name})")


def _require_isolation() -> None:
    """--strict-sandbox: probe before anything runs, and refuse with one line naming what is missing."""
    layers = isolation.probe_layers()
    missing = isolation.missing_guarantees(layers)
    if missing:
        raise SandboxUnavailable(f"--strict-sandbox: no {' or '.join(missing)} isolation here: {isolation.why_missing(layers)}; see grade --sandbox-info")


def _explain(key: str) -> None:
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
    write_starter(path)
    click.echo(f"wrote {path}; next: edit it, then `grade references --regenerate --suite {path}`")


@suite_group.command("check")
@click.argument("path", type=click.Path(path_type=Path))
def suite_check_command(path: Path) -> None:
    """Validate a suite file (exit 2 with the line and key of the first mistake)."""
    suite = load_suite(path)
    off = f"; turned off: {', '.join(suite.disabled)}" if suite.disabled else ""
    click.echo(f"{path}: valid suite '{suite.name}': {len(suite.cases)} cases, {len(suite.checks)} checks, {suite.max_score:g} points{off}")


def fail(message: str, code: ExitCode) -> NoReturn:
    click.echo(f"grade: error: {inert(message)}", err=True)
    sys.exit(int(code))


def main() -> None:
    """The console script and `python -m grader`."""
    try:
        cli.main()
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # grade ... | head: the reader is gone
            # Python's own flush at exit would fail again, print a traceback and exit 120: stdout
            # goes to /dev/null instead (the recipe of the signal module's documentation).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
