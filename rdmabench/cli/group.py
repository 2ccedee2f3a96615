"""The command group and what every command shares: errors as one line and an exit code, progress
lines shown safely, and the checked options that name the files a command writes."""

from __future__ import annotations

import functools
import importlib
import os
import shlex
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, NoReturn

import click

from .. import __version__, userfiles
from ..errors import ConfigError, RdmabenchError, error_line
from ..escape import visible_lines
from ..job import stopping
from ..units import ascii_float, ascii_int, check_seconds, whole_number

# Every command: -h as --help, wide enough for the option tables, defaults shown.
SETTINGS = {"show_default": True}


def say(text: str) -> None:
    """A benchmark's progress line: GPU, NIC and file names in it reach the terminal shown, never raw."""
    click.echo(visible_lines(text))


def fail(exc: RdmabenchError) -> NoReturn:
    click.echo(error_line(str(exc)), err=True)
    sys.exit(exc.exit_code)


def command_line() -> str:
    """The command as typed, recorded in what a command writes."""
    return shlex.join(["rdmabench", *sys.argv[1:]])


def names(text: str, option: str | None = None) -> list[str]:
    """A comma-separated list of names, at least one: a list of none (`,`) would measure nothing and
    pass, so it is refused, naming its option (`option`, else the current command's option that holds
    `text`)."""
    found = [part.strip() for part in text.split(",") if part.strip()]
    if not found:
        raise ConfigError(f"{option or _holding(text)} names nothing: give at least one")
    return found


def _holding(text: str) -> str:
    """The option of the command being run whose value is `text` (for its error line), else 'a list'."""
    context = click.get_current_context(silent=True)
    if context is not None:
        for param in context.command.params:
            if isinstance(param, click.Option) and context.params.get(param.name or "") == text:
                # its name as help shows it first (a renamed option's old name comes after)
                return next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
    return f"the list {text!r}"


def seconds_within(most: float) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback for an option of seconds: above 0, at most `most`, finite (units.check_seconds,
    as run checks --sample-time and --timeout)."""

    def checked(context: click.Context, param: click.Parameter, value: Any) -> Any:
        return value if value is None else check_seconds(value, max(param.opts, key=len), most)

    return checked


def count(text: str, option: str) -> int:
    """A whole number an option takes (units.whole_number: ASCII digits only)."""
    return whole_number(text, option)


class Written(NamedTuple):
    """A file a command writes, named by an option: its flags, its parameter, and what it holds."""

    flags: tuple[str, ...]
    dest: str
    holds: str  # for the refusal: "cannot write <holds> to PATH: ..."
    help: str
    dash_is_stdout: bool = False  # `-` names standard output, as leaving the option out does (no file "-")


def writes(
    *targets: Written, checked_here: bool = True, reads: Callable[[dict[str, Any]], Iterable[str]] | None = None
) -> Callable[[Any], Any]:
    """The options naming the files a command writes, and one --force for them all. Each named file
    is checked (`userfiles.check_output`: no device, FIFO, directory, dangling link or missing folder;
    an existing file only with --force) before the command does anything, so nothing is measured or
    computed for a file that cannot be written. `checked_here=False`: the command checks in the
    library (run: under mpirun every rank parses the command line, and only rank 0 writes). `reads`:
    the files the command reads, from its parameters; an output that is one of them is refused, even
    with --force (`userfiles.check_not_an_input`), before anything is read or written."""

    def decorate(command: Any) -> Any:
        @functools.wraps(command)
        def checked(**kwargs: Any) -> Any:
            try:
                for target in targets:
                    if target.dash_is_stdout and kwargs.get(target.dest) == "-":
                        kwargs[target.dest] = None
                outputs = [(t.flags[0], kwargs[t.dest]) for t in targets if kwargs.get(t.dest) is not None]
                if reads is not None and outputs:
                    userfiles.check_not_an_input(outputs, reads(kwargs))  # a folder's files listed once
                named: dict[str, str] = {}
                for target in targets if checked_here else ():
                    if kwargs.get(target.dest) is not None:
                        userfiles.check_output(kwargs[target.dest], kwargs["force"], target.holds)
                        same = named.setdefault(os.path.realpath(kwargs[target.dest]), target.flags[0])
                        if same != target.flags[0]:  # the second write would replace the first, or be refused
                            raise ConfigError(f"{same} and {target.flags[0]} name the same file {kwargs[target.dest]}")
            except RdmabenchError as exc:
                fail(exc)
            return command(**kwargs)

        flags = " and ".join(target.flags[0] for target in targets)
        replace = f"Replace {flags} if it exists." if len(targets) == 1 else f"Replace the files {flags} name."
        options = [click.option(*t.flags, t.dest, default=None, metavar="FILE", help=t.help) for t in targets]
        options.append(click.option("--force", is_flag=True, help=replace))
        for option in reversed(options):
            checked = option(checked)
        return checked

    return decorate


class AsciiNumber(click.ParamType):
    """click's INT or FLOAT (or a range of them) that reads ASCII digits only (units.ascii_int,
    ascii_float): click's own call int() and float(), which read '٣' as 3 and '1_0' as 10. Every
    command's numeric options get it when the command is added (`ascii_numbers`), declared or not."""

    def __init__(self, inner: click.ParamType):
        self.inner, self.name = inner, inner.name
        whole = isinstance(inner, click.types.IntParamType)
        self._read: Callable[[str], float] = ascii_int if whole else ascii_float
        self._what = "whole number" if whole else "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                self._read(value)
            except ValueError:
                self.inner.convert(value, param, ctx)  # no number at all: click's own line says so
                self.fail(f"{value!r} is not a {self._what} in ASCII digits (0-9)", param, ctx)
        return self.inner.convert(value, param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str | None:
        return self.inner.get_metavar(param, ctx)


def ascii_numbers(command: click.Command) -> click.Command:
    """`command` with each numeric parameter read in ASCII digits only (AsciiNumber)."""
    for param in command.params:
        if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
            param.type = AsciiNumber(param.type)
    return command


# Each command's module (rdmabench.cli.NAME), imported when its command is asked for: a command line
# loads its own command's code, not the seven others' (the NIXL anchor, the beside loads, storage...).
COMMANDS = ("anchor", "check", "compare", "copy", "doctor", "report", "run", "storage")


class OneLineErrors(click.Group):
    """Every error as one line and an exit code: click's usage errors (not a Usage: block) and the
    library's RdmabenchError, which commands let rise to here rather than catch themselves. Commands
    load lazily (COMMANDS); `commands` itself, as click's help and suggestions read it, holds them all."""

    _loaded: dict[str, click.Command]

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        for name in COMMANDS:
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._loaded = value

    def _load(self, name: str) -> None:
        if name in COMMANDS and name not in self._loaded:
            importlib.import_module(f"{__package__}.{name}")  # its @main.command() adds it

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        self._loaded[name or cmd.name or ""] = ascii_numbers(cmd)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load(cmd_name)
        return self._loaded.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        if {"-h", "--help"} & set(sys.argv[1:]):  # a run refuses with a broken plugin; help goes on, and says so
            from ..measure import registry

            problem = registry.plugin_problem()
            if problem:
                click.echo(f"rdmabench: warning: {problem}", err=True)
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "rdmabench"
            click.echo(error_line(f"{exc.format_message()} (see {command} --help)"), err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo(error_line("aborted"), err=True)
            sys.exit(130)
        except stopping.Stopped as stop:  # SIGTERM or Ctrl-C (cli/__init__ armed the handler)
            sys.exit(stopping.said(stop, stopping.command_named(sys.argv)))
        except click.ClickException as exc:
            click.echo(error_line(exc.format_message()), err=True)
            sys.exit(exc.exit_code)
        except RdmabenchError as exc:  # the library's errors, caught once, here at the edge
            fail(exc)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="rdmabench")
def main() -> None:
    """Measure how fast data really moves between GPUs, host memory and nodes, over UCX.

    Every bandwidth is in GB/s = 1e9 bytes/s, timed until the receiver has every byte, with every
    payload checked, and with the transport UCX actually chose recorded beside it.
    """
    if not {"-h", "--help"} & set(sys.argv[1:]):
        # Read once before any command runs: a bad RDMABENCH_MAX_INPUT stopped `run` only once it had
        # measured, when its results were read back (the stream left, no results file).
        userfiles.max_input_bytes()
