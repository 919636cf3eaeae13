"""The `grade` command. Only this module imports click: it parses, calls the library, picks the
reporters and maps errors to exit codes (see grader.errors.ExitCode)."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
import warnings
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import click
import numpy as np
import rich_click
from rich.console import Console
from rich.table import Table
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text

from grader import __version__
from grader.bounds import MEMORY_MB, TIMEOUT_S, function_name_problem
from grader.cache import NoCacheFolder, ResultCache
from grader.diagnosis.registry import RULES, lookup
from grader.discover import Rule, discover
from grader.errors import ExitCode, GraderEnvironmentError, GraderError, SandboxUnavailable, UsageError
from grader.pipeline import is_environment_error, run, unreached_report
from grader.prepare import Options, prepare
from grader.refdata import load_default_suite, load_references, reference_dir_for, regenerate
from grader.report.csvfmt import RESERVED as GRADEBOOK_COLUMNS
from grader.report.feedback import FeedbackWriter, prepare_folder
from grader.report.files import OutputSpec, check_writable, parse_output
from grader.report.jsonload import INDEX, Merge
from grader.report.model import NOT_GRADED, UNREACHED, Report
from grader.report import untrusted
from grader.report.sinks import Sinks, Tally, open_sinks
from grader.report.targets import candidate_folders, check_outputs, named, submission_files
from grader.report.registry import FORMATS, RunInfo
from grader.report.roster import Roster, load_roster
from grader.report.text import summary_table
from grader.sandbox.forkserver import ForkServers
from grader.sandbox import isolation
from grader.shard import Shard
from grader.slots import default_jobs
from grader.starter import write_starter
from grader.suite import load_suite


# The help, rendered by rich-click (click's help through rich, in panels): grading's options in
# the groups a user looks for them by. An option named here that a command does not have is
# left out; one named nowhere is listed under "Options".
OPTION_GROUPS: list[dict[str, Any]] = [
    {"name": "Input", "options": ["--candidate", "--submission-file", "--function", "--framework", "--shard"]},
    {"name": "Checks and limits", "options": ["--suite", "--timeout", "--memory", "--jobs", "--explain"]},
    {"name": "Output", "options": ["--format", "--output", "--quiet", "--verbose", "--audience", "--feedback", "--roster"]},
    {"name": "Cache", "options": ["--no-cache", "--cache-dir"]},
    {"name": "Sandbox", "options": ["--strict-sandbox", "--sandbox-info"]},
]
HELP_CONFIG: dict[str, Any] = {"option_groups": {"grade check": OPTION_GROUPS}, "text_paragraph_linebreaks": "\n\n"}
EXIT_CODES = (
    "Exit codes: 0 every submission passed; 1 a submission failed or could not be graded; "
    "2 bad input (a path, an option, a suite, the references, an output file) or a submission "
    "not graded because the worker cannot import what the grader's Python can; 3 internal "
    "error; 130 interrupted (what was graded is kept and written)."
)

MERGE_EXIT_CODES = (
    "Exit codes: 0 every submission passed; 1 a submission failed, was not graded, or is in none of the reports given; "
    "2 a file that is not a complete JSON report of this grader version, reports of different suites, grader versions "
    "or runs, or a submission in two of them (nothing is written then); 130 interrupted."
)


class DefaultGroup(rich_click.RichGroup):
    """`grade PATH ...` grades (it is `grade check PATH ...`); `grade explain ...`, `grade
    references ...`, `grade suite ...` are the other commands."""

    default = "check"
    # A subgroup (`grade suite`) is a plain rich group: RichGroup would make it a DefaultGroup too,
    # with a default command of its own.
    group_class = rich_click.RichGroup

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("subcommand_metavar", "[PATHS]... | COMMAND [ARGS]...")
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in (*self.commands, "--version", *ctx.help_option_names):
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: rich_click.RichContext, formatter: rich_click.RichHelpFormatter) -> None:  # type: ignore[override]  # rich-click's own signature
        """`grade --help` is the help of grading, the default command (its text, its options in
        their groups, its exit codes), with the group's own options and every command before
        the exit codes."""
        default = self.commands[self.default]
        with default.make_context(self.default, [], parent=ctx, resilient_parsing=True, help_option_names=[]) as sub:
            self.format_usage(ctx, formatter)
            default.format_help_text(sub, formatter)
            default.format_options(sub, formatter)
            self.format_options(ctx, formatter)  # --version, --help and the commands
            default.format_epilog(sub, formatter)

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


@click.group("grade", cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"], "rich_help_config": HELP_CONFIG})
@click.version_option(__version__, prog_name="grade")
def cli() -> None:
    """Grade submissions of scaled dot-product attention."""
    _quiet_numerics()


def _function_name(value: str | None) -> str | None:
    """--function: what `def` accepts (grader.bounds); an empty name is no name, not the suite's."""
    problem = function_name_problem(value) if value is not None else None
    if problem:
        raise click.BadParameter(problem)
    return value


def _finite(value: float | None) -> float | None:
    """click's FloatRange lets NaN through: it compares false with both ends."""
    if value is not None and value != value:
        raise click.BadParameter("must be a finite number of seconds, got nan")
    return value


def _quiet_numerics() -> None:
    """No numpy warning about a candidate's values on stderr, among the grader's own lines: the
    judging (pipeline.judge) works on inf, NaN and complex results on purpose, and numpy's
    nan-functions warn outside np.errstate (an all-NaN row). Set once, before any thread starts."""
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"(numpy|grader)(\.|$)")
    warnings.filterwarnings("ignore", category=getattr(np, "exceptions", np).ComplexWarning)


@cli.command("check", short_help="Grade files, notebooks and folders (the default command).", epilog=EXIT_CODES)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--candidate", is_flag=True, help="Each PATH is one candidate's checkout, graded as one submission (a CI step in a candidate's repository: grade --candidate .).")
@click.option("--submission-file", "pattern", metavar="GLOB", help="In a candidate's checkout, grade the one file whose relative path matches GLOB (default: the file that defines the function).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, metavar="FMT", help=f"What to print on stdout: {', '.join(FORMATS)}.")
@click.option("--output", "-o", "outputs", multiple=True, metavar="FMT=PATH", help="Also write a report file in FMT (repeatable), e.g. -o junit=report.xml.")
@click.option("--feedback", "feedback_dir", type=click.Path(path_type=Path), metavar="DIR", help="Also write one Markdown file per submission into DIR (made if missing), named after its candidate: the candidate's view unless --audience reviewer is given.")
@click.option("--roster", "roster_path", type=click.Path(path_type=Path), metavar="FILE.csv", help="Join this roster (a CSV whose column 'candidate' or 'id', else its first, names the candidate) into the CSV gradebook; every candidate and every roster row is listed.")
@click.option("--jobs", "-j", "jobs", type=click.IntRange(min=1), metavar="N", help="Submissions graded at once: at most N workers run at a time (default: the number of CPUs).")
@click.option("--shard", "shard_text", metavar="I/N", help="Grade only the I-th of N slices of the submissions found (I counts from 1), for a CI matrix of N jobs: slices cut by path, the same in every job, sizes within one; join their JSON reports with `grade merge`.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar; the text report gives one line per submission.")
@click.option("--verbose", "-v", is_flag=True, help="The text report with every figure: the measured values, mismatch statistics, why each mistake matters, what the submission printed.")
@click.option("--audience", type=click.Choice(("reviewer", "candidate")), default="reviewer", show_default=True, help="candidate: what a candidate may see in every format (the bugs, their lines and fixes, pass/fail per check), no expected values, stored cases or fresh inputs.")
@click.option("--no-cache", "no_cache", is_flag=True, help="Neither reuse nor store cached results.")
@click.option("--cache-dir", "cache_dir", type=click.Path(path_type=Path), envvar="GRADER_CACHE_DIR", show_envvar=True, help="Where results are cached (default: ~/.cache/attention-grader).")
@click.option("--function", "function", metavar="NAME", callback=lambda _ctx, _param, value: _function_name(value), help="Grade this function name instead of the suite's (default: attention).")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="A suite YAML file (default: the built-in suite).")
@click.option("--timeout", "timeout", type=click.FloatRange(min=TIMEOUT_S.low, max=TIMEOUT_S.high), callback=lambda _ctx, _param, value: _finite(value), metavar="SECONDS", help=f"Wall-clock limit per submission, at most {TIMEOUT_S.high:g} s (default 10).")
@click.option("--memory", "memory", type=click.IntRange(min=int(MEMORY_MB.low), max=int(MEMORY_MB.high)), metavar="MB", help=f"Memory limit per submission, at most {int(MEMORY_MB.high)} MB, 1 TB (default 1024).")
@click.option("--explain", "explain", metavar="NAME", help="Print the full explanation of a diagnosis (name or code) and exit.")
@click.option("--sandbox-info", "sandbox_info", is_flag=True, help="Print which isolation layers work on this machine and exit.")
@click.option("--strict-sandbox", "strict_sandbox", is_flag=True, help="Refuse to grade (exit 2) unless network, filesystem and process isolation are all active.")
@click.option("--framework", "framework", type=click.Choice(("auto", "numpy", "torch", "jax")), metavar="NAME", help="Arrays the function receives: numpy, torch, jax, or auto (from its imports); default: the suite's.")
def check_command(
    paths: tuple[Path, ...],
    candidate: bool,
    pattern: str | None,
    fmt: str,
    outputs: tuple[str, ...],
    feedback_dir: Path | None,
    roster_path: Path | None,
    jobs: int | None,
    shard_text: str | None,
    quiet: bool,
    verbose: bool,
    audience: str,
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
    """Grade submissions of attention(Q, K, V) and name their bugs.

    PATHS are files (.py, .ipynb), folders of them and candidates' checkouts. `grade PATHS` is
    short for `grade check PATHS`.

    \b
    Examples:
      grade sub.py                  one file: verdict, bugs, their lines and fixes
      grade -v sub.py               the same with every figure behind it
      grade submissions/            each file, and each subfolder as one candidate
      grade --candidate .           this checkout as one candidate (a CI step)
      grade -j 8 -q -o junit=r.xml submissions/
      grade --function my_attention --timeout 20 sub.py
      grade explain --list          every diagnosis; grade explain S201 for one
    """
    if explain:
        _explain(explain)
        return
    if sandbox_info:
        _sandbox_info(fmt)
        return
    if not paths:
        raise UsageError("no submission given; try: grade path/to/submission.py")
    shard = Shard.parse(shard_text) if shard_text is not None else None
    specs = [parse_output(text) for text in outputs]
    for spec in specs:
        check_writable(spec.path)  # before grading: a bad output path must not cost a whole batch
    check_outputs(specs, [*named(suite_path, "the suite"), *named(roster_path, "the roster")], feedback=feedback_dir)
    roster = _roster(roster_path, fmt, specs)
    feedback = _feedback(feedback_dir, audience)
    options = Options(function=function, timeout_s=timeout, memory_mb=memory, strict_sandbox=strict_sandbox, framework=framework)
    _tolerant_output()
    commands = _StoppedCommands.begin(fmt)  # before anything reads a candidate's files
    # NumPy's server started before the suite and references load: its own start (numpy's
    # import) runs meanwhile. Torch's and JAX's start with the first submission that needs one.
    server = ForkServers.start()
    try:
        request = _Request(
            list(paths), specs, options, candidate=candidate, pattern=pattern, fmt=fmt, jobs=jobs, quiet=quiet, verbose=verbose, audience=audience,
            no_cache=no_cache, cache_dir=cache_dir, suite_path=suite_path, roster=roster, feedback=feedback, shard=shard,
        )
        code = _grade(request, server, commands)
    finally:
        commands.resume()  # also when grading failed: the runner must not stay deaf to the next steps
        server.close()
        for note in server.notes():  # once per run and framework, never per submission
            click.echo(f"grade: note: {inert(note)}", err=True)
    sys.exit(code)


@dataclass(frozen=True)
class _Request:
    """What `grade check` was asked to do, its options read and checked."""

    paths: list[Path]
    specs: list[OutputSpec]  # the -o files, each checked writable
    options: Options  # what prepare() takes: function, limits, strict sandbox, framework
    candidate: bool = False
    pattern: str | None = None  # --submission-file
    fmt: str = "text"
    jobs: int | None = None
    quiet: bool = False
    verbose: bool = False
    audience: str = "reviewer"
    no_cache: bool = False
    cache_dir: Path | None = None
    suite_path: Path | None = None
    roster: Roster | None = None
    feedback: FeedbackWriter | None = None
    shard: Shard | None = None


def _grade(request: _Request, server: ForkServers | None, commands: _StoppedCommands) -> ExitCode:
    options, specs, fmt, shard, quiet = request.options, request.specs, request.fmt, request.shard, request.quiet
    suite = load_suite(request.suite_path) if request.suite_path else load_default_suite()
    found = discover(request.paths, Rule(function=options.function or suite.function, pattern=request.pattern, entry=suite.entry), candidate=request.candidate)
    # --shard: this job's slice, by path (grader.shard). Each report keeps its place among all
    # the submissions found, by which `grade merge` puts the shards back in order.
    places = shard.select([s.label for s in found]) if shard is not None else list(range(len(found)))
    submissions = [found[i] for i in places]
    # No output onto a submission found (of any shard) or into the references: before grading.
    check_outputs(specs, submission_files(found), named(reference_dir_for(suite), "the suite's references folder"), request.feedback.folder if request.feedback else None, twice=False, candidates=candidate_folders(found))
    if len(submissions) > 1 and "gradescope" in (fmt, *(spec.fmt for spec in specs)):
        raise UsageError(f"gradescope: results.json describes one submission, and {len(submissions)} were found; grade each submission in its own run")
    if options.strict_sandbox:
        _require_isolation()
    prepared = prepare(suite, options)
    try:
        cache = None if request.no_cache else ResultCache.for_run(prepared, request.cache_dir)
    except NoCacheFolder as exc:  # grading goes on, uncached
        click.echo(f"grade: warning: {exc}", err=True)
        cache = None
    info = RunInfo(
        prepared.suite.name, prepared.suite.max_score_for(prepared.framework), quiet=quiet, verbose=request.verbose,
        audience="candidate" if request.audience == "candidate" else "reviewer", roster=request.roster,
        discovered=len(found), shard=str(shard) if shard is not None else None, suite_fingerprint=prepared.suite.fingerprint(),
        expected=len(submissions),
    )
    tally = _Tally()
    interrupted = False
    reached: set[int] = set()  # the submissions whose reports came
    # Every sink made now (a report file's temporary file too), each report handed to all of
    # them as it is known and then dropped (grader.report.sinks).
    with _open_sinks(fmt, specs, info, request.feedback) as sinks:
        # One submission has no bar; a batch's bar shares the text report's console, so the reports
        # print above it and none starts on its last line.
        bar = None if quiet or len(submissions) <= 1 or os.environ.get("CI") or not sys.stdout.isatty() else _progress(len(submissions), getattr(sinks.stdout, "console", None))
        if bar is not None:
            bar.start()
        try:
            with closing(run(submissions, prepared, jobs=request.jobs or default_jobs(), cache=cache, forkserver=server)) as results:
                for index, report in results:
                    reached.add(index)
                    tally.add(report)
                    sinks.add(index, replace(report, extra={**report.extra, INDEX: places[index]}))
                    del report  # nothing here keeps a report once its sinks had it
                    if bar is not None:
                        bar.update(bar.task_ids[0], advance=1, failed=tally.total - tally.passed)
        except KeyboardInterrupt:  # closing the run stopped its workers; what was graded is kept
            interrupted = True
        finally:
            if bar is not None:
                bar.stop()
        if interrupted:  # the gradebook and JUnit list the rest as not graded
            for index in sorted(set(range(len(submissions))) - reached):
                sinks.add(index, replace(unreached_report(submissions[index], prepared), extra={NOT_GRADED: UNREACHED, INDEX: places[index]}))
        _finish(sinks, tally, fmt, quiet, commands)
    if cache is not None and cache.problem:
        click.echo(f"grade: warning: {inert(cache.problem)}", err=True)
    return tally.exit_code(fmt, interrupted, len(submissions), "graded")


class _Tally(Tally):
    """What the command keeps of the reports once their sinks had them: the end-of-batch figures
    (no Row per submission) and each not-graded message of the grader's environment."""

    def __init__(self) -> None:
        super().__init__()
        self.environment: dict[str, None] = {}  # messages, each once, in order

    def add(self, report: Report) -> None:
        super().add(report)
        if is_environment_error(report) and report.error:
            self.environment[report.error] = None

    def exit_code(self, fmt: str, interrupted: bool, expected: int, done: str) -> ExitCode:
        # Not graded because of the grader's own environment (the worker could not import what the
        # grader's Python can): the report says so in one line; exit 2, as for a bad installation.
        if fmt != "text":
            for message in self.environment:
                click.echo(f"grade: error: {inert(message)}", err=True)
        if interrupted:
            click.echo(f"grade: interrupted: {self.total} of {expected} submissions {done}; their results are kept", err=True)
            return ExitCode.INTERRUPTED
        if self.environment:
            return GraderEnvironmentError.exit_code
        return ExitCode.OK if self.passed == self.total == expected else ExitCode.FAILED


def _open_sinks(fmt: str, specs: list[OutputSpec], info: RunInfo, feedback: FeedbackWriter | None = None) -> Sinks:
    """The sinks of a run: ``fmt`` on stdout, the report files, the feedback folder and, under
    GitHub Actions, the annotations and the job summary."""
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    summary = os.environ.get("GITHUB_STEP_SUMMARY") if in_actions else None
    more = [feedback] if feedback is not None else []
    return open_sinks(fmt, specs, info, sys.stdout, sys.stderr, annotations=in_actions, job_summary=Path(summary) if summary else None, more=more)  # type: ignore[arg-type]


def _finish(sinks: Sinks, tally: _Tally, fmt: str, quiet: bool, commands: _StoppedCommands) -> None:
    """stdout's report completed, the end-of-batch table on a terminal's stderr, then (once the
    runner reads workflow commands again) annotations, job summary and report files."""
    sinks.finish_stdout()
    if fmt != "text" and not quiet and tally.total > 1 and sys.stderr.isatty():
        Console(stderr=True, emoji=False).print(summary_table(tally.summary()))
    commands.resume()
    sinks.finish()
    for warning in sinks.warnings:
        click.echo(f"grade: warning: {inert(warning)}", err=True)


@cli.command("merge", epilog=MERGE_EXIT_CODES)
@click.argument("reports", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="What to print on stdout.")
@click.option("--output", "-o", "outputs", multiple=True, metavar="FMT=PATH", help="Also write a report file in FMT (repeatable), e.g. -o csv=gradebook.csv.")
@click.option("--quiet", "-q", is_flag=True, help="The text report gives one line per submission.")
@click.option("--audience", type=click.Choice(("reviewer", "candidate")), default="reviewer", show_default=True, help="candidate: what a candidate may see, in every format (as for grade check).")
@click.option("--feedback", "feedback_dir", type=click.Path(path_type=Path), metavar="DIR", help="Also write one Markdown file per submission into DIR, the candidate's view unless --audience reviewer is given.")
@click.option("--roster", "roster_path", type=click.Path(path_type=Path), metavar="FILE.csv", help="Join this roster into the CSV gradebook (as for grade check).")
def merge_command(reports: tuple[Path, ...], fmt: str, outputs: tuple[str, ...], quiet: bool, audience: str, feedback_dir: Path | None, roster_path: Path | None) -> None:
    """Merge the JSON reports of shards into the reports of one run.

    REPORTS are JSON reports of `grade --shard I/N` (or of whole runs) over the same submissions.
    They are written in every format asked for, in the order one run over all of them would give.

    \b
    Examples:
      grade --shard 1/2 -o json=shard-1.json submissions/     one CI job
      grade --shard 2/2 -o json=shard-2.json submissions/     another
      grade merge shard-*.json -o csv=gradebook.csv -o junit=report.xml
    """
    if not reports:
        raise UsageError("no report given; try: grade merge shard-1.json shard-2.json")
    specs = [parse_output(text) for text in outputs]
    for spec in specs:
        check_writable(spec.path)
    check_outputs(specs, [*((report, f"the report {report}") for report in reports), *named(roster_path, "the roster")], feedback=feedback_dir)
    roster = _roster(roster_path, fmt, specs)
    feedback = _feedback(feedback_dir, audience)
    _tolerant_output()
    commands = _StoppedCommands.begin(fmt)  # before anything of a candidate is read
    try:
        code = _merge(list(reports), specs, fmt, quiet, commands, audience=audience, roster=roster, feedback=feedback)
    finally:
        commands.resume()
    sys.exit(code)


def _merge(paths: list[Path], specs: list[OutputSpec], fmt: str, quiet: bool, commands: _StoppedCommands, *, audience: str = "reviewer", roster: Roster | None = None, feedback: FeedbackWriter | None = None) -> ExitCode:
    merge = Merge.open(paths)  # every file read and checked first: a refusal writes nothing
    if merge.total > 1 and "gradescope" in (fmt, *(spec.fmt for spec in specs)):
        raise UsageError(f"gradescope: results.json describes one submission, and the reports hold {merge.total}")
    head = merge.header
    info = RunInfo(
        head.suite_name, head.max_score, quiet=quiet, audience="candidate" if audience == "candidate" else "reviewer", roster=roster,
        discovered=head.discovered, suite_fingerprint=head.fingerprint,
    )
    tally = _Tally()
    interrupted = False
    reached: set[int] = set()  # the submissions whose reports came
    with _open_sinks(fmt, specs, info, feedback) as sinks:
        try:
            for index, report in enumerate(merge.reports()):
                tally.add(report)
                sinks.add(index, report)
                del report
        except KeyboardInterrupt:
            interrupted = True
        _finish(sinks, tally, fmt, quiet, commands)
    if merge.missing:
        click.echo(f"grade: warning: {inert(merge.missing)}", err=True)
    return tally.exit_code(fmt, interrupted, head.discovered if not interrupted else merge.total, "merged")


def _feedback(folder: Path | None, audience: str) -> FeedbackWriter | None:
    """--feedback DIR, its folder made now: the candidate's view unless the reviewer's is asked
    for by name (a default must not send expected values to candidates)."""
    if folder is None:
        return None
    prepare_folder(folder)
    asked = click.get_current_context().get_parameter_source("audience") is not click.core.ParameterSource.DEFAULT
    return FeedbackWriter(folder, "reviewer" if asked and audience == "reviewer" else "candidate")


def _roster(path: Path | None, fmt: str, specs: list[OutputSpec]) -> Roster | None:
    """--roster, read and checked before grading. Raises UsageError: for a bad roster, and when
    no CSV gradebook is written to join it into."""
    if path is None:
        return None
    if "csv" not in (fmt, *(spec.fmt for spec in specs)):
        raise UsageError(f"--roster {path}: the roster is joined into the CSV gradebook; add --format csv or -o csv=FILE")
    return load_roster(path, GRADEBOOK_COLUMNS)


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
    submission must never stop the report of the others. And a reader of stdout that goes away
    (``grade -o junit=r.xml subs/ | head``) must not stop the run: the report files are still
    written and the exit code is the grading's."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    if not isinstance(sys.stdout, _UntilTheReaderLeaves):
        sys.stdout = _UntilTheReaderLeaves(sys.stdout)


class _UntilTheReaderLeaves:
    """stdout that, once its reader has gone (a broken pipe), sends the rest to /dev/null, as the
    signal module's documentation recommends, instead of raising in the middle of a report."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self._stream, name)


def inert(text: str) -> str:
    """A message for stderr that may name a candidate's file: one line, controls escaped, no
    workflow command."""
    return untrusted.no_commands(untrusted.line(text))


class RateColumn(ProgressColumn):
    """Submissions per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f}/s" if speed else "-/s", style="dim")


def _progress(total: int, console: Console | None = None) -> Progress:
    """The progress bar: done / total, failures so far, rate and time left (terminals only)."""
    progress = Progress(
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        RateColumn(),
        TimeRemainingColumn(),
        console=console,
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
        raise UsageError(f"unknown diagnosis '{key}'; `grade explain --list` lists every diagnosis")
    click.echo(rule.explain())


def _explain_list() -> None:
    """Every diagnosis on one line: code, name and what it is in words. A table on a terminal;
    aligned plain lines, never wrapped, for a pipe or a file."""
    if sys.stdout.isatty():
        table = Table("code", "name", "what it is", box=None, header_style="bold", pad_edge=False)
        for rule in RULES:
            table.add_row(rule.code, rule.name, rule.title + (" (warning)" if rule.severity == "warning" else ""))
        Console(emoji=False, highlight=False).print(table)
        return
    width = max(len(rule.name) for rule in RULES)
    for rule in RULES:
        click.echo(f"{rule.code}  {rule.name:<{width}}  {rule.title}" + (" (warning)" if rule.severity == "warning" else ""))


@cli.command("explain")
@click.argument("name", required=False)
@click.option("--list", "list_all", is_flag=True, help="List every diagnosis: its code, name and what it is (also without NAME).")
def explain_command(name: str | None, list_all: bool) -> None:
    """Explain a diagnosis, by name (scale-by-dk) or code (S201); --list lists them all.

    The explanation says what the diagnosis checks, why the mistake matters, an example and
    what to write instead.
    """
    if list_all or name is None:
        _explain_list()
    else:
        _explain(name)


@cli.command("references")
@click.option("--verify", "action", flag_value="verify", default=True, help="Check the stored references against their checksums (default).")
@click.option("--regenerate", "action", flag_value="regenerate", help="Write the references again from the float64 reference implementation.")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="The suite whose references to handle (default: the built-in suite).")
@click.option("--out", "out", type=click.Path(path_type=Path), help="With --regenerate: write into this folder instead.")
def references_command(action: str, suite_path: Path | None, out: Path | None) -> None:
    """Verify or regenerate the stored references of a suite.

    The references are the expected weights and outputs of the suite's cases, written the same,
    byte for byte, on every run.
    """
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
    """Write or check a suite, the YAML file of a take-home's cases and checks."""


@suite_group.command("new")
@click.argument("path", type=click.Path(path_type=Path))
def suite_new_command(path: Path) -> None:
    """Write a commented starter suite to PATH (never over a file)."""
    write_starter(path)
    click.echo(f"wrote {path}; next: edit it, then `grade references --regenerate --suite {shlex.quote(str(path))}`")


@suite_group.command("check")
@click.argument("path", type=click.Path(path_type=Path))
def suite_check_command(path: Path) -> None:
    """Validate a suite file.

    A mistake exits 2 with the line and the key of the first one.
    """
    suite = load_suite(path)
    off = f"; turned off: {', '.join(suite.disabled)}" if suite.disabled else ""
    numpy = suite.max_score_for("numpy")
    points = f"{suite.max_score:g} points" + (f" ({numpy:g} for NumPy submissions)" if numpy != suite.max_score else "")
    click.echo(f"{path}: valid suite '{suite.name}': {len(suite.cases)} cases, {len(suite.checks)} checks, {points}{off}")


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
