"""The test registry: one record per kind of test, and the only place that knows what a test is.

A record says what a test measures (its result field, unit and which direction is better), how a
pair of ranks becomes the links of one round, whether it may run in concurrent rounds, which step
protocol moves its bytes (measure/window.py, pingpong.py, onesided.py; a block list's, blocksteps.py,
given for a run's shape by `protocols`; see measure/contract.py) and how a figure comes from the times
of a sample's steps. Tables, matrices,
reports, compare and the preflight ask the registry; nothing else branches on a test's name.

Adding a test: a module that builds a TestKind and calls register() (rdmabench/measure/kinds/ for
the built-in ones); a module of your own is loaded when its name is in $RDMABENCH_PLUGINS
(comma-separated), in every rank and in `report`/`compare`. A plugin whose import raises anything
is one line naming it: a run refuses to start, `report` reads files without it.
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..modes import MemoryMode
from .blocksteps import BlocksProtocol
from .offloadsteps import OffloadProtocol

if TYPE_CHECKING:
    from .contract import StepProtocol
    from .postings import Posting
    from .shape import Shape

PLUGINS_ENV = "RDMABENCH_PLUGINS"
# Units whose smaller figure is the better one, for results of a test this process has no record of.
_TIME_UNITS = ("ns", "us", "ms", "s")


def refuse_ucx_allocated(mode: MemoryMode) -> str | None:
    """Memory UCX allocates is lent for remote access: only one-sided tests ask UCX for it."""
    if mode.ucx_allocated:
        return "memory allocated by UCX is for the one-sided tests (put, get, put-lat, get-lat)"
    return None


@dataclass(frozen=True)
class TestKind:
    name: str
    summary: str  # one line for --help
    field: str  # the entry's figure: "bandwidth_gbps", "latency_us", ...
    unit: str  # of the figure and the samples: "GB/s", "us"
    higher_is_better: bool
    scope: str  # what one figure covers: "unidirectional", "per-direction", "half round trip"
    protocol: StepProtocol
    # The links of one round for a pair (a, b): [(a, b)], both ways [(a, b), (b, a)], or reversed.
    pair_links: Callable[[int, int], list[tuple[int, int]]]
    # The figure of one sample from its step times: (size, messages or round trips per step, step
    # seconds) -> value in `unit`.
    figure: Callable[[int, int, list[float]], float]
    # When a step's clock stops, for the table's header.
    timing: str = "timed until the receiver acknowledged every message"
    concurrent: bool = True  # may run in rounds of many links (ring, incast, all-pairs --concurrent, ...)
    # Remote memory access: UCX's RMA feature on, the native loop on every rank.
    one_sided: bool = False
    # How --blocks moves this test's bytes: wire.native's RMA_PUT, RMA_GET or TAGGED (None: no block lists).
    block_op: int | None = None
    # Why the test cannot use a memory mode (None: it can); asked for both ends before a job starts.
    refuse_mode: Callable[[MemoryMode], str | None] = lambda mode: refuse_ucx_allocated(mode)
    # An offload (offloadsteps.OUT or IN): the list moves between a rank's GPU and its own pinned pool.
    offload: str | None = None

    def protocols(self, shape: Shape, postings: Collection[Posting] | None = None) -> list[StepProtocol]:
        """The step protocols that move this test's bytes in `shape`, in the order they run: its own
        for messages; for a block list, one a posting path (of `postings`, where given: those every rank
        can run), moved by `block_op`."""
        if not shape.lists:
            return [self.protocol]
        if self.offload is not None:
            chosen = [found for found in shape.lists if postings is None or found.posting in postings]
            return [OffloadProtocol(self.offload, found) for found in chosen]
        if self.block_op is None:
            raise ConfigError(f"--blocks moves the bytes of put, get or bw, not of --test {self.name}")
        names = None if postings is None else {posting.name for posting in postings}
        chosen = [found for found in shape.lists if names is None or found.posting.name in names]
        return [BlocksProtocol(self.block_op, found, shape.device) for found in chosen]

    @property
    def both_ways(self) -> bool:
        """A pair's round moves bytes in both directions at once: all-pairs visits each pair once."""
        return len({frozenset(link) for link in self.pair_links(0, 1)}) == 1 and len(self.pair_links(0, 1)) == 2

    @property
    def is_bandwidth(self) -> bool:
        """Figures in GB/s: they get the link's physical limit and a share of it."""
        return self.unit == "GB/s"


_KINDS: dict[str, TestKind] = {}
_PLUGIN_OF: dict[str, str] = {}  # test name -> the plugin module that registered it
_BROKEN: dict[str, str] = {}  # plugin module -> what its import raised, in one line
_loaded = False


def register(kind: TestKind, replace: bool = False) -> TestKind:
    """Make `kind` known to runs, tables, reports and compare. Registering the same name twice is
    an error unless `replace` (a module imported twice, under pytest and as a plugin, replaces)."""
    if kind.name in _KINDS and not replace and _KINDS[kind.name] != kind:
        raise ConfigError(f"a test named {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def plugin_modules() -> list[str]:
    """The modules $RDMABENCH_PLUGINS names, in order."""
    return list(dict.fromkeys(filter(None, (part.strip() for part in os.environ.get(PLUGINS_ENV, "").split(",")))))


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    importlib.import_module(f"{__package__}.kinds")
    for name in plugin_modules():
        before = set(_KINDS)
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # anyone's code: whatever it raises is one line, not a crash
            _BROKEN[name] = _import_failure(exc)
            for test in set(_KINDS) - before:  # half a plugin is not offered
                del _KINDS[test]
            continue
        _PLUGIN_OF.update(dict.fromkeys(set(_KINDS) - before, name))


def _import_failure(exc: BaseException) -> str:
    """What a plugin's import raised, and where, on one line."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split()) or "(no message)"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {text}{where}"


def plugin_problem() -> str | None:
    """One line naming each plugin whose import failed, or None."""
    _load()
    if not _BROKEN:
        return None
    return "; ".join(f"{PLUGINS_ENV}: plugin {name!r} failed at import: {why}" for name, why in _BROKEN.items())


def plugin_failure(module: str) -> str | None:
    """What plugin `module`'s import raised here, or None (not named, or loaded)."""
    _load()
    return _BROKEN.get(module)


def plugin_of(name: object) -> str | None:
    """The plugin module that registered test `name` (None: built in, or unknown here)."""
    _load()
    return _PLUGIN_OF.get(name) if isinstance(name, str) else None


def _refuse_broken() -> None:
    """A run with a plugin that failed must not go on as if it had not been asked for."""
    problem = plugin_problem()
    if problem:
        raise ConfigError(problem)


def names() -> tuple[str, ...]:
    _refuse_broken()
    return tuple(_KINDS)


def loaded_names() -> tuple[str, ...]:
    """The tests this process knows, without refusing for a plugin that failed (for --help)."""
    _load()
    return tuple(_KINDS)


def get(name: str) -> TestKind:
    """The record of test `name`; ConfigError naming the choices for an unknown one, or the plugin that failed."""
    _refuse_broken()
    kind = _KINDS.get(name)
    if kind is None:
        raise ConfigError(f"unknown test {name!r}: choose one of {', '.join(_KINDS)}")
    return kind


def find(name: object) -> TestKind | None:
    """The record of a test a results file names, or None for one this process does not know (a broken
    plugin does not stop the reading of files: `report` says which plugin a file's test needs)."""
    _load()
    return _KINDS.get(name) if isinstance(name, str) else None


def higher_is_better(test: object, unit: object) -> bool:
    """For a result of `test` in `unit`: its record's say, else a time unit's smaller-is-better."""
    kind = find(test)
    if kind is not None:
        return kind.higher_is_better
    return unit not in _TIME_UNITS
