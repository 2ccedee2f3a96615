"""From a schedule to rounds: which links each round measures, in which memory, with how much in
flight. A round of one scheduled pair becomes the test's own links for a pair (one, or one each
way); a round of a concurrent pattern keeps its links, each from --src-mode to --dst-mode memory."""

from __future__ import annotations

from ..measure.beside import Beside
from ..measure.contract import Link, StepProtocol
from ..measure.entry import Entry
from ..measure.plan import HOST, MIXED, Plan, make_plan
from ..measure.registry import TestKind
from ..measure.round import RoundSpec
from ..stats import median
from .config import RunConfig
from .schedule import Link as Pair


def is_pattern_round(config: RunConfig) -> bool:
    """Whether this run's rounds load many links at once (their entries carry the pattern's aggregate)."""
    return config.pattern.concurrent or config.what.concurrent


def size_plan(config: RunConfig, protocol: StepProtocol, size: int, spans_hosts: bool = False) -> Plan:
    """The plan of every round of one size moved by `protocol`. `spans_hosts`: the run has ranks on
    several hosts."""
    memory = config.memory_class
    if memory == HOST and spans_hosts:
        # Between hosts a NIC's DMA engine moves host memory, not a core: no cache to fit, and a
        # network round trip to cover. (One plan serves every round of a size, so a run over several
        # hosts gives its links within a host the deeper window too.)
        memory = MIXED
    steps = config.steps
    return make_plan(
        protocol.windowed,
        size,
        memory,
        protocol.in_flight or steps.window,  # a block list: every block of its transfers
        steps.iterations,
        steps.warmup,
        steps.samples,
        steps.sample_time,
        steps.timeout,
        steps.passes if protocol.streams else 1,
    )


def fan(links: list[Pair] | tuple[Link, ...]) -> int:
    """The most links one rank of a round sends on, or receives on."""
    sends: dict[int, int] = {}
    receives: dict[int, int] = {}
    for link in links:
        src, dst = (link.src, link.dst) if isinstance(link, Link) else link
        sends[src] = sends.get(src, 0) + 1
        receives[dst] = receives.get(dst, 0) + 1
    return max([*sends.values(), *receives.values(), 1])


def round_links(config: RunConfig, kind: TestKind, scheduled: list[Pair]) -> tuple[Link, ...]:
    if is_pattern_round(config):
        return tuple(Link(s, d, config.memory.src_mode, config.memory.dst_mode) for s, d in scheduled)
    ((a, b),) = scheduled
    if kind.offload is not None:  # the rank with itself: its two pools, each of its own mode
        return tuple(Link(s, d, config.memory.src_mode, config.memory.dst_mode) for s, d in kind.pair_links(a, b))
    mode = {a: config.memory.src_mode, b: config.memory.dst_mode}  # each rank of a pair keeps its own memory
    return tuple(Link(s, d, mode[s], mode[d]) for s, d in kind.pair_links(a, b))


def round_spec(
    config: RunConfig,
    kind: TestKind,
    scheduled: list[Pair],
    size: int,
    plan: Plan,
    protocol: StepProtocol,
    alone: bool = False,
    load: Beside | None = None,
) -> RoundSpec:
    """One round moved by `protocol`; `alone`: never beside compute (a protocol's companion); `load`:
    which of --beside's loads (a carve-out of it), else its first."""
    links = round_links(config, kind, scheduled)
    most, steps = fan(links), config.steps
    first = config.beside.first if config.beside else None
    beside = None if alone else load or first
    return RoundSpec(
        kind, links, size, plan.shared(most, steps.window is not None), steps.validate, config.staging, protocol,
        steps.one_buffer, beside=beside,
    )  # fmt: skip


def slow_links(entries: list[Entry], below: float, higher_is_better: bool = True) -> list[Pair]:
    """The links whose figure is worse than `below` x the median of their link class (same host,
    inter-node), worst first: what a screen measures again, alone."""
    classes: dict[str, list[float]] = {}
    for entry in entries:
        classes.setdefault(entry.ends.link, []).append(entry.value)
    medians = {link_class: median(values) for link_class, values in classes.items()}

    def shortfall(entry: Entry) -> float:
        median = medians[entry.ends.link]
        if higher_is_better:
            return entry.value / median
        return median / entry.value if entry.value > 0 else 1.0

    slow = [e for e in entries if medians[e.ends.link] > 0 and shortfall(e) < below]
    return [(e.src_rank, e.dst_rank) for e in sorted(slow, key=shortfall)]
