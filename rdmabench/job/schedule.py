"""Which links a run measures, and which of them at the same time.

A schedule is a list of rounds; the links of one round run concurrently, rounds run one after the
other. `pair` and `all-pairs` (by default) measure one link per round, alone; `ring`, `incast`,
`fan-out` and `bisection` load many links at once, and `all-pairs --concurrent` packs disjoint
pairs into rounds (a round-robin tournament: N-1 rounds of N/2 pairs, each pair once per direction).

Over several hosts with the same number of ranks each, `all-pairs --concurrent` follows the
machine: first every host's own links (each host a tournament of its ranks, all hosts at once),
then the hosts meet in tournament rounds, and in each meeting local rank i talks to local rank
i + shift of the other host, shift 0 first (rail-aligned: GPU i with GPU i, through the NICs of
the same rail). `screen` covers a cluster in O(hosts) rounds instead of O(ranks): a ring within every
host each way, then every pair of hosts, rail-aligned, each way; the job then re-measures alone the
links that fell well below their class's median.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError

LINK_CLASSES = ("all", "intra-node", "inter-node")
Link = tuple[int, int]


def tournament_rounds(ranks: int) -> list[list[tuple[int, int]]]:
    """Round-robin pairing (the circle method): every unordered pair exactly once, no rank twice in a
    round; N-1 rounds of N/2 pairs (N rounds with one rank resting when N is odd)."""
    players: list[int | None] = list(range(ranks))
    if ranks % 2:
        players.append(None)
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = []
        for i in range(count // 2):
            a, b = players[i], players[count - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def host_ranks(hosts: Sequence[str]) -> list[list[int]]:
    """The ranks of each host, hosts in order of their first rank; a rank's position is its rail."""
    groups: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        groups.setdefault(host, []).append(rank)
    return list(groups.values())


def _uniform(groups: list[list[int]]) -> bool:
    return len({len(g) for g in groups}) == 1


def _both_ways(links: list[Link]) -> list[list[Link]]:
    return [links, [(d, s) for s, d in links]]


def intra_rounds(groups: list[list[int]]) -> list[list[Link]]:
    """Every host's own ordered pairs, all hosts at once: each host's tournament, each way."""
    per_host = [[[(g[a], g[b]) for a, b in pairs] for pairs in tournament_rounds(len(g))] for g in groups]
    rounds: list[list[Link]] = []
    for index in range(max((len(r) for r in per_host), default=0)):
        links = [link for r in per_host if index < len(r) for link in r[index]]
        if links:
            rounds.extend(_both_ways(links))
    return rounds


def inter_rounds(groups: list[list[int]], shifts: int | None = None) -> list[list[Link]]:
    """Hosts meet in tournament rounds; in a meeting local rank i sends to local rank i + shift of
    the other host (shift 0: rail-aligned), then the other way. All shifts: every ordered
    inter-host pair once; `shifts` 1: the rail-aligned pairs only."""
    rails = len(groups[0])
    rounds: list[list[Link]] = []
    for meetings in tournament_rounds(len(groups)):
        for shift in range(rails if shifts is None else shifts):
            links = [(groups[a][i], groups[b][(i + shift) % rails]) for a, b in meetings for i in range(rails)]
            rounds.extend(_both_ways(links))
    return rounds


def ring_rounds(groups: list[list[int]]) -> list[list[Link]]:
    """A ring within every host, all hosts at once, one way then the other (2 ranks: one round of
    both directions; 1 rank: nothing)."""
    forward = [(g[i], g[(i + 1) % len(g)]) for g in groups if len(g) > 1 for i in range(len(g))]
    if not forward:
        return []
    if all(len(g) <= 2 for g in groups):
        return [sorted(set(forward))]
    return _both_ways(forward)


def screen(hosts: Sequence[str]) -> list[list[Link]]:
    """O(hosts) rounds meeting every GPU within its host and every pair of hosts on every rail."""
    groups = host_ranks(hosts)
    if len(groups) < 2:
        raise ConfigError(
            f"--pattern screen checks a cluster: its {len(hosts)} ranks are all on {hosts[0]}; use all-pairs on one host"
        )
    if not _uniform(groups):
        counts = ", ".join(f"{hosts[g[0]]} {len(g)}" for g in groups)
        raise ConfigError(f"--pattern screen needs the same number of ranks on every host (here: {counts})")
    return ring_rounds(groups) + inter_rounds(groups, shifts=1)


def _concurrent_all_pairs(hosts: Sequence[str], link_class: str) -> list[list[Link]]:
    groups = host_ranks(hosts)
    if len(groups) > 1 and _uniform(groups):
        rounds = [] if link_class == "inter-node" else intra_rounds(groups)
        return rounds + ([] if link_class == "intra-node" else inter_rounds(groups))
    rounds = []
    for pairs in tournament_rounds(len(hosts)):
        for direction in (0, 1):
            links = [(a, b) if direction == 0 else (b, a) for a, b in pairs]
            links = [link for link in links if _wanted(link, hosts, link_class)]
            if links:
                rounds.append(links)
    return rounds


def _wanted(link: Link, hosts: Sequence[str], link_class: str) -> bool:
    same = hosts[link[0]] == hosts[link[1]]
    return link_class == "all" or (link_class == "intra-node") == same


@dataclass(frozen=True)
class Ranks:
    """What a pattern's rounds are made of: the ranks (by their hosts) and the run's choices."""

    hosts: Sequence[str]
    link_class: str = "all"
    concurrent: bool = False  # all-pairs: disjoint pairs packed into rounds
    root: int = 0  # incast's and fan-out's
    bidirectional: bool = False  # the test measures both directions of a pair at once


def _all_pairs(ranks: Ranks) -> list[list[Link]]:
    n = len(ranks.hosts)
    if ranks.concurrent:
        return _concurrent_all_pairs(ranks.hosts, ranks.link_class)
    return [
        [(s, d)]
        for s in range(n)
        for d in range(n)
        if s != d and (s < d or not ranks.bidirectional) and _wanted((s, d), ranks.hosts, ranks.link_class)
    ]


def _ring(ranks: Ranks) -> list[list[Link]]:
    n = len(ranks.hosts)
    return [[(r, (r + 1) % n) for r in range(n)]] if n > 2 else [[(0, 1), (1, 0)]]


def _bisection(ranks: Ranks) -> list[list[Link]]:
    half = len(ranks.hosts) // 2  # rank i of the first half exchanges with rank i of the second
    return [[(i, i + half) for i in range(half)] + [(i + half, i) for i in range(half)]]


@dataclass(frozen=True)
class Pattern:
    """A pattern, once: its name, its phrase in --pattern's help, its rounds, and what the
    configuration's checks and the job ask of it. A new pattern is its rounds and its record here."""

    name: str
    summary: str  # its part of --pattern's help
    rounds: Callable[[Ranks], list[list[Link]]]
    concurrent: bool = False  # its rounds load many links at once (an aggregate per round)
    packs: bool = False  # --concurrent packs its links into rounds (all-pairs)
    one_pair: bool = False  # ranks 0 and 1 only: the pair's table, the others idle
    remeasures: bool = False  # links well below their class's median are measured again alone (--remeasure-below)
    halves: bool = False  # pairs the job's two halves: an odd count leaves the last rank idle
    own: bool = False  # every rank with itself: an offload's (a rank's GPU and its own pinned pool) only


PATTERNS: dict[str, Pattern] = {
    pattern.name: pattern
    for pattern in (
        Pattern("pair", "ranks 0 and 1", lambda ranks: [[(0, 1)]], one_pair=True),
        Pattern("all-pairs", "every ordered pair, one at a time", _all_pairs, packs=True),
        Pattern("ring", "every rank to the next at once", _ring, concurrent=True),
        Pattern(
            "incast",
            "all to --root",
            lambda ranks: [[(r, ranks.root) for r in range(len(ranks.hosts)) if r != ranks.root]],
            concurrent=True,
        ),
        Pattern(
            "fan-out",
            "--root to all",
            lambda ranks: [[(ranks.root, r) for r in range(len(ranks.hosts)) if r != ranks.root]],
            concurrent=True,
        ),
        Pattern("bisection", "the two halves of the job at once", _bisection, concurrent=True, halves=True),
        Pattern(
            "each",
            "every rank with itself at once (swap-out, swap-in: every GPU offloading)",
            lambda ranks: [[(r, r) for r in range(len(ranks.hosts))]],
            concurrent=True,
            own=True,
        ),
        Pattern(
            "screen",
            "a cluster screen (a ring in every host, every pair of hosts rail-aligned, slow links re-measured alone)",
            lambda ranks: [links for links in screen(ranks.hosts) if links],
            concurrent=True,
            remeasures=True,
        ),
    )
}


def pattern_help() -> str:
    """--pattern's help, from the records: each pattern's summary, in order."""
    return "Which links: " + "; ".join(pattern.summary for pattern in PATTERNS.values()) + "."


def pattern_named(name: str) -> Pattern:
    """The pattern `name`; one line naming the choices for any other."""
    pattern = PATTERNS.get(name)
    if pattern is None:
        raise ConfigError(f"unknown pattern {name!r}: choose one of {', '.join(PATTERNS)}")
    return pattern


def schedule(
    pattern: str | Pattern,
    hosts: Sequence[str],
    link_class: str = "all",
    concurrent: bool = False,
    root: int = 0,
    bidirectional: bool = False,
) -> list[list[Link]]:
    """Rounds of (src, dst) links for `pattern` (its record, or its name) over ranks whose hosts are
    `hosts`. A bidirectional test measures both directions of a pair at once, so all-pairs then visits
    each pair once."""
    n = len(hosts)
    record = pattern if isinstance(pattern, Pattern) else pattern_named(pattern)
    if link_class not in LINK_CLASSES:
        raise ConfigError(f"unknown link class {link_class!r}: choose one of {', '.join(LINK_CLASSES)}")
    if n < (1 if record.own else 2):  # every rank with itself: one rank is a job
        raise ConfigError("a transfer needs at least 2 ranks (use --np 2, or mpirun -n 2)")
    if not 0 <= root < n:
        raise ConfigError(f"--root {root} is not a rank of this {n}-rank job")
    return record.rounds(Ranks(hosts, link_class, concurrent, root, bidirectional))


def roles(rounds: list[list[Link]], rank: int) -> tuple[bool, bool]:
    """Whether `rank` ever sends, and ever receives, in this schedule."""
    sends = any(src == rank for links in rounds for src, _ in links)
    receives = any(dst == rank for links in rounds for _, dst in links)
    return sends, receives


def estimate_seconds(ranks: int, per_link_seconds: float, concurrent: bool) -> float:
    """Time of an all-pairs sweep of `ranks` ranks, when one link takes `per_link_seconds` alone and
    (concurrent) disjoint links take no longer together than one alone."""
    if concurrent:
        return 2 * (ranks - 1 + ranks % 2) * per_link_seconds
    return ranks * (ranks - 1) * per_link_seconds
