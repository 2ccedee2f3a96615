"""Option groups the commands share, so one concept has one spelling everywhere, and the option
types that parse a value once (a size, a memory mode), naming the option in the error.

A group is a decorator that adds its click options in order. Metavars and help name what the
registries hold (the tests, the memory modes, the report formats), never a copy of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..errors import ConfigError
from ..measure import registry
from ..measure.beside import LOADS
from ..modes import MODE_HELP, MemoryMode
from ..results.files.rows import LINK_CLASSES
from ..results.verdicts.verdict import parse_expect
from ..units import parse_size, parse_sizes

Decorator = Callable[[Any], Any]


def group(*options: Decorator) -> Decorator:
    """The options as one decorator, listed in --help in the order given."""

    def decorate(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def choices(names: Any) -> str:
    """A registry's names as a metavar: a|b|c."""
    return "|".join(str(getattr(name, "value", name)) for name in names)


class Renamed(click.Option):
    """An option whose old spelling (`old`) still works, for users' scripts, and is not shown in --help."""

    def __init__(self, *args: Any, old: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.old = old

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [name for name in shown if name not in self.old]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def renamed(new: str, *old: str, **kwargs: Any) -> Decorator:
    """An option spelled `new`, still answering to its `old` spellings (hidden)."""
    return click.option(new, *old, cls=Renamed, old=old, **kwargs)


class _Parsed(click.ParamType):
    """A value parsed by the library; its error names the option (unless it does already) and stays
    one line (exit 2)."""

    def __init__(self, name: str, parse: Callable[[str], Any], named: bool = True) -> None:
        self.name = name
        self.parse = parse
        self.named = named

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value)
        except ConfigError as exc:
            if not self.named:
                raise
            option = param.opts[0] if param is not None and param.opts else self.name
            raise ConfigError(f"{option}: {exc}") from None


SIZE = _Parsed("size", parse_size)
SIZES = _Parsed("sizes", parse_sizes)
MODE = _Parsed("mode", MemoryMode.parse)


def _rails(text: str) -> tuple[str, ...]:
    """--nics as a tuple of distinct device names."""
    rails = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not rails or any(" " in name or "/" in name for name in rails):
        raise ConfigError(f"--nics takes device names separated by commas (mlx5_0:1,eth1), not {text!r}")
    return rails


RAILS = _Parsed("rails", _rails, named=False)


def parsed(name: str, parse: Callable[[str], Any]) -> click.ParamType:
    """A value `parse` turns into what the command takes, its error (which names its option) one line."""
    return _Parsed(name, parse, named=False)


SIZES_HELP = (
    "a list (8,1MiB,64MiB), a power-of-two range (1:64MiB), or a range with a step (1:64MiB:x4). KiB/MiB/GiB "
    "(or K/M/G) are binary; kB/MB/GB are decimal"
)


def test_names() -> str:
    """The tests registered, for --help (a plugin that failed is named in the help; a run refuses)."""
    return choices(registry.loaded_names())


def test_help() -> str:
    known = "; ".join(f"{kind.name}: {kind.summary}" for kind in map(registry.find, registry.loaded_names()) if kind)
    problem = registry.plugin_problem()
    return known + "." + (f" Not available: {problem}." if problem else "")


def mode_help(lead: str) -> str:
    return lead + "; ".join(MODE_HELP.get(mode, mode.value) for mode in MemoryMode) + "."


def sizes_option(default: str | None, what: str, shown: str = "") -> Decorator:
    """--sizes: every command's list of sizes, one syntax (parsed by each command)."""
    return click.option("--sizes", default=default, metavar="SIZES", help=f"{what}, as for run{shown}.")


def _floors(_ctx: click.Context, _param: click.Parameter, texts: tuple[str, ...]) -> dict[str, float]:
    return parse_expect(texts)


def expect_option(help_text: str) -> Decorator:
    """--expect: floors per limit kind or link class, or 'default' (run, report, check), as a dict."""
    return click.option(
        "--expect", multiple=True, metavar="KIND=SHARE|default|slowdown=F", callback=_floors, help=help_text
    )


def tolerance_option(default: float, help_text: str) -> Decorator:
    """--tolerance: how much worse than the baseline counts as worse (check; compare, once --threshold)."""
    return renamed("--tolerance", "--threshold", "tolerance", default=default, help=help_text)


# Which results `report`, `check` and `compare` read. Parsed by cli/reading.filters.
selection_options = group(
    # Any test a results file names (copy's and storage's too), not only run's: no list of choices.
    click.option("--test", "tests", multiple=True, metavar="TEST", help="Only this test (repeatable)."),
    click.option(
        "--mode",
        "modes",
        multiple=True,
        metavar="MODE",
        help="Only entries with this memory mode at either end (repeatable).",
    ),
    renamed(
        "--sizes",
        "--size",
        "sizes",
        default=None,
        metavar="SIZES",
        help="Only these sizes (same syntax as run --sizes).",
    ),
    click.option("--host", "hosts", multiple=True, help="Only links with an end on this host (repeatable)."),
    click.option(
        "--link-class",
        "link_classes",
        multiple=True,
        metavar=choices(LINK_CLASSES),
        help="Only this class of link (repeatable).",
    ),
    click.option(
        "--since",
        default=None,
        metavar="WHEN",
        help="Only runs made at or after WHEN: YYYY-MM-DD (from the start of that UTC day) or "
        "YYYY-MM-DDTHH:MM[:SS] with Z or an offset (2026-11-25T08:00:00+01:00); nothing else.",
    ),
    click.option(
        "--until",
        default=None,
        metavar="WHEN",
        help="Only runs made at or before WHEN, as --since (a day: through its end, UTC).",
    ),
)


def format_option(names: tuple[str, ...], help_text: str) -> Decorator:
    """--format: what a command prints, among the names its registry knows."""
    return click.option("--format", "output_format", default=names[0], metavar=choices(names), help=help_text)


# The memory of a run's ends, and how much of it may be pinned (run).
memory_options = group(
    click.option(
        "--mode",
        default=None,
        type=MODE,
        metavar=choices(MemoryMode),
        help=mode_help("Memory of both sides: ")
        + " [default: pageable; swap-out: device -> pinned, swap-in: the reverse]",
    ),
    click.option(
        "--src-mode",
        default=None,
        type=MODE,
        metavar=choices(MemoryMode),
        help="Memory of the sending rank (0); overrides --mode.",
    ),
    click.option(
        "--dst-mode",
        default=None,
        type=MODE,
        metavar=choices(MemoryMode),
        help="Memory of the receiving rank (1); overrides --mode.",
    ),
    click.option(
        "--max-pinned",
        default=None,
        type=SIZE,
        metavar="SIZE",
        help="Most page-locked memory a rank may hold (e.g. 4GiB); pinned buffers are allocated once and reused across sizes.",
    ),
    click.option(
        "--chunk-size",
        "stage_chunk",
        default="4MiB",
        type=SIZE,
        metavar="SIZE",
        help="staged mode: bytes per pinned staging buffer (one UCX message); messages are cut into chunks of this size.",
    ),
    click.option(
        "--stage-buffers",
        type=int,
        default=2,
        help="staged mode: pinned buffers per direction of a link (2 = double buffering, 1 = no overlap).",
    ),
    click.option(
        "--require-gdr",
        is_flag=True,
        help="Fail, instead of warning, when device memory is staged through host memory (and make UCX fail rather than fall back).",
    ),
)

# A run's message sizes: --sizes, or nccl-tests' -b/-e/-f (run).
size_options = group(
    click.option(
        "--sizes", default=None, type=SIZES, metavar="SIZES", help=f"Message sizes: {SIZES_HELP}. [default: 1:64MiB:x4]"
    ),
    click.option(
        "-b",
        "--min-size",
        default=None,
        type=SIZE,
        metavar="SIZE",
        help="nccl-tests style: smallest size (with -e, -f).",
    ),
    click.option("-e", "--max-size", default=None, type=SIZE, metavar="SIZE", help="nccl-tests style: largest size."),
    click.option(
        "-f", "--step-factor", type=int, default=None, help="nccl-tests style: each size this many times the last. [2]"
    ),
)


def beside_option(help_lead: str) -> Decorator:
    """--beside: a model's compute on each rank's GPU beside the transfers (run, anchor --against nixl),
    one syntax and one list of loads; `help_lead`: what the command does with it."""
    return click.option(
        "--beside",
        default="none",
        metavar="|".join(f"{name}[:SIZE]" for name in LOADS) + "|none",
        help=help_lead
        + " "
        + "; ".join(f"{name} = {load.meaning} (SIZE {load.size_text(load.default)})" for name, load in LOADS.items())
        + ".",
    )


def _budget(text: str) -> float:
    from ..results.reports.answer import parse_budget

    return parse_budget(text)


def model_budget_option(where: str = "") -> Decorator:
    """--model-budget: the model's slowdown a posting path may cost in the answer (report, compare, run)."""
    return click.option(
        "--model-budget",
        "model_budget",
        default="5%",
        type=_Parsed("budget", _budget, named=False),
        metavar="PCT",
        help=f"Which posting path for a block list{where}: the fastest whose slowdown of the model beside it "
        "stays within this share of the model's time; a percentage (5%) or a fraction below 1 (0.05).",
    )
