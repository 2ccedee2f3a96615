"""Schedules that follow the machine: all-pairs --concurrent host by host and rail-aligned between
hosts, and the O(hosts) screen. Pure schedule logic over host lists (what MPI reports per rank); the
runs over real ranks and namespace hosts are in test_patterns.py and test_multinode_netns.py."""

from __future__ import annotations

import itertools

import pytest

from rdmabench.errors import ConfigError
from rdmabench.job.schedule import host_ranks, schedule


def _hosts(count: int, per_host: int) -> list[str]:
    return [f"n{h}" for h in range(count) for _ in range(per_host)]


def _disjoint(rounds: list[list[tuple[int, int]]]) -> None:
    for links in rounds:
        senders, receivers = [s for s, _ in links], [d for _, d in links]
        assert len(set(senders)) == len(senders) and len(set(receivers)) == len(receivers)


@pytest.mark.parametrize(("count", "per_host"), [(2, 4), (4, 2), (8, 4), (3, 4), (5, 1)])
def test_concurrent_all_pairs_covers_every_ordered_pair_once_host_by_host(count: int, per_host: int) -> None:
    hosts = _hosts(count, per_host)
    rounds = schedule("all-pairs", hosts, concurrent=True)
    links = [link for r in rounds for link in r]
    n = len(hosts)
    assert sorted(links) == [(s, d) for s in range(n) for d in range(n) if s != d]
    _disjoint(rounds)
    for r in rounds:  # one link class per round: a round is calibrated and read as one kind of link
        assert len({hosts[s] == hosts[d] for s, d in r}) == 1
    if count % 2 == 0:
        assert len(rounds) == 2 * (n - 1)  # every rank busy in every round
        assert all(len(r) == n // 2 for r in rounds)


def test_hosts_meet_rail_aligned_first() -> None:
    hosts = _hosts(4, 4)
    groups = host_ranks(hosts)
    inter = [r for r in schedule("all-pairs", hosts, concurrent=True) if hosts[r[0][0]] != hosts[r[0][1]]]
    first = inter[0]
    rail = {rank: group.index(rank) for group in groups for rank in group}
    assert all(rail[s] == rail[d] for s, d in first)  # local rank i with local rank i of the other host
    assert {hosts[s] for s, _ in first} | {hosts[d] for _, d in first} == set(hosts)


def test_links_filter_keeps_one_phase() -> None:
    hosts = _hosts(2, 3)
    intra = schedule("all-pairs", hosts, "intra-node", concurrent=True)
    inter = schedule("all-pairs", hosts, "inter-node", concurrent=True)
    assert all(hosts[s] == hosts[d] for r in intra for s, d in r) and len([x for r in intra for x in r]) == 12
    assert all(hosts[s] != hosts[d] for r in inter for s, d in r) and len([x for r in inter for x in r]) == 18


@pytest.mark.parametrize(("count", "per_host"), [(2, 4), (8, 4), (4, 8), (128, 8), (3, 2), (2, 1)])
def test_screen_meets_every_host_pair_on_every_rail_in_o_hosts_rounds(count: int, per_host: int) -> None:
    hosts = _hosts(count, per_host)
    groups = host_ranks(hosts)
    rounds = schedule("screen", hosts)
    _disjoint(rounds)
    links = {link for r in rounds for link in r}
    for a, b in itertools.permutations(range(count), 2):  # every host pair, each way, on every rail
        for rail in range(per_host):
            assert (groups[a][rail], groups[b][rail]) in links
    if per_host > 1:  # every GPU sends and receives within its host
        intra = [(s, d) for s, d in links if hosts[s] == hosts[d]]
        assert {s for s, _ in intra} == {d for _, d in intra} == set(range(len(hosts)))
    ring = 0 if per_host == 1 else (1 if per_host == 2 else 2)
    assert len(rounds) == ring + 2 * (count - 1 + count % 2)  # O(hosts), not O(ranks)


def test_a_screen_of_1024_gpus_is_a_few_hundred_rounds() -> None:
    rounds = schedule("screen", _hosts(128, 8))
    assert len(rounds) == 256 and sum(len(r) for r in rounds) == 128 * 8 * 2 + 128 * 127 * 8


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        (["a"] * 4, "--pattern screen checks a cluster: its 4 ranks are all on a"),
        (["a", "a", "b", "b", "b"], "the same number of ranks on every host (here: a 2, b 3)"),
    ],
)
def test_screen_refuses_what_it_cannot_screen(hosts: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        schedule("screen", hosts)


def test_a_pattern_is_one_record_that_drives_the_schedule_the_check_and_the_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new pattern is its record in schedule.PATTERNS, nothing else: the scheduler runs its rounds,
    the configuration's check applies what it declares, and --pattern's help and metavar name it."""
    from click.testing import CliRunner

    from rdmabench.cli import main
    from rdmabench.job.config import RunConfig
    from rdmabench.job.rounds import is_pattern_round
    from rdmabench.job.schedule import PATTERNS, Pattern, pattern_help

    backwards = Pattern(
        "backwards", "every rank to the one before at once", lambda r: [[(1, 0), (0, 1)]], concurrent=True
    )
    monkeypatch.setitem(PATTERNS, "backwards", backwards)
    assert schedule("backwards", _hosts(1, 2)) == [[(1, 0), (0, 1)]]
    config = RunConfig.from_options({"test": "bw", "pattern": "backwards"})
    assert is_pattern_round(config)
    with pytest.raises(ConfigError, match="one link at a time"):
        RunConfig.from_options({"test": "lat", "pattern": "backwards"})  # a concurrent pattern, a test of one link
    with pytest.raises(ConfigError, match="other patterns are concurrent already"):
        RunConfig.from_options({"test": "bw", "pattern": "backwards", "concurrent": True})
    assert pattern_help().endswith("; every rank to the one before at once.")
    with pytest.raises(ConfigError, match="backwards"):  # the choices named come from the records
        schedule("nope", _hosts(1, 2))
    assert "all-pairs|" in CliRunner().invoke(main, ["run", "--help"]).output
