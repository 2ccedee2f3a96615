"""The drain list: Slurm hostlists compressed and expanded back, host names checked before they go
into a command line, and the file written as a new regular file, never run and never followed."""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest

from devtools.diagnose import Cluster, Fault, generated
from rdmabench.errors import ConfigError, ResultsFileError
from rdmabench.results.files.rows import aggregate
from rdmabench.results.verdicts.attribution import Attribution, attribute
from rdmabench.results.verdicts.drain import (
    drain_text,
    drained_hosts,
    drains,
    ran_on,
    reason,
    refusals,
    write_drain_list,
)
from rdmabench.results.verdicts.hostlist import compress, expand, is_hostname


@pytest.mark.parametrize(
    ("names", "hostlist"),
    [
        (["node003", "node017", "node018"], "node[003,017-018]"),
        (["node017"], "node017"),
        (["n9", "n10", "n11", "n1"], "n[1,9-11]"),
        (["node099", "node100", "node101", "node007"], "node[007,099-101]"),  # 100 joins the padded width
        (["gpu01", "gpu02", "node3", "login", "node4", "node3"], "gpu[01-02],login,node[3-4]"),
        (["node01", "node1", "node001"], "node001,node01,node1"),  # three widths: three names
        (["a-1", "a-2", "b.example.com", "rack2-node3", "rack2-node4"], "a-[1-2],b.example.com,rack2-node[3-4]"),
        ([], ""),
    ],
)
def test_hostlists_compress_as_slurm_writes_them(names: list[str], hostlist: str) -> None:
    assert compress(names) == hostlist
    assert expand(hostlist) == sorted(set(names))


def test_hostlists_round_trip() -> None:
    rng = random.Random(7)
    for _ in range(300):
        names = set()
        for _ in range(rng.randrange(1, 40)):
            prefix = rng.choice(["node", "gpu-", "n", "rack1-h", "login", "x.y"])
            width = rng.choice([0, 2, 3, 4])
            number = rng.randrange(0, 1200)
            names.add(prefix if prefix in ("login", "x.y") else f"{prefix}{number:0{width}d}")
        text = compress(names)
        assert expand(text) == sorted(names), text
        assert compress(expand(text)) == text


@pytest.mark.parametrize(
    "bad", ['node"1', "node 1", "-node1", "node1;reboot", "$(reboot)", "node`id`", "nöde1", "node1\n", "a" * 64, ""]
)
def test_names_that_are_not_hostnames_are_refused(bad: str) -> None:
    assert not is_hostname(bad)
    with pytest.raises(ConfigError, match="not a hostname"):
        compress(["node1", bad])


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("node[1-3", "brackets do not pair"),
        ("node[[1]]", "brackets do not pair"),
        ("node[3-1]", "reversed"),
        ("node[1-99999999]", "over 1,000,000"),
        ("node[a-b]", "not a number or a range"),
        ("no de[1-2]", "not a hostname"),
    ],
)
def test_bad_hostlists_are_refused(bad: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        expand(bad)


CLUSTER = Cluster(16, 4, 2)
HOSTS = ran_on([("generated", generated(CLUSTER, "screen", Fault("none"), seed=2))])


def _found(fault: Fault) -> Attribution:
    return attribute(aggregate([("generated", generated(CLUSTER, "screen", fault, seed=2))]))


def test_the_drain_list_names_the_hosts_of_suspect_parts_only(tmp_path: Path) -> None:
    nic = _found(Fault("nic", 3, 1, "send", factor=0.6))
    assert drained_hosts(nic, HOSTS) == ["node003"]
    text = drain_text(nic, HOSTS)
    lines = text.splitlines()
    assert lines[2] == "# hostlist: node003"
    assert lines[-1].startswith('scontrol update NodeName=node003 State=DRAIN Reason="rdmabench: nic mlx5_1:1 send at ')
    assert lines[-1].endswith(' of class median (30 links)"') and lines[-1].count('"') == 2
    pair = _found(Fault("pair", 2, direction="both", peer=9, factor=0.6))
    assert drained_hosts(pair, HOSTS) == [] and "scontrol update" not in drain_text(pair, HOSTS)
    assert "# not drained, a path between hosts: pair node002 <-> node009" in drain_text(pair, HOSTS)
    healthy = _found(Fault("none"))
    assert drained_hosts(healthy, HOSTS) == [] and "# hostlist: (none)" in drain_text(healthy, HOSTS)


def test_a_reason_cannot_end_its_quotes_or_reach_a_shell() -> None:
    assert reason('rdmabench: gpu "x" $(reboot) `id` \\ ; & | <> \n!') == (
        "rdmabench: gpu _x_ _(reboot) _id_ _ _ _ _ __ __"
    )
    assert len(reason("x" * 1000)) == 200


def test_the_drain_list_is_a_new_file_never_followed_never_executable(tmp_path: Path) -> None:
    found = _found(Fault("host", 5, direction="both", factor=0.5))
    path = tmp_path / "drain.txt"
    assert [d.host for d in write_drain_list(str(path), found, HOSTS)] == ["node005"]
    assert path.read_text() == drain_text(found, HOSTS)
    mode = stat.S_IMODE(path.stat().st_mode)
    assert not mode & 0o111 and not mode & 0o022
    with pytest.raises(ResultsFileError, match="already exists; choose another path or pass --force"):
        write_drain_list(str(path), found, HOSTS)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    link = tmp_path / "linked.txt"
    link.symlink_to(target)
    with pytest.raises(ResultsFileError, match="already exists"):
        write_drain_list(str(link), found, HOSTS)
    write_drain_list(str(link), found, HOSTS, force=True)  # the link is replaced by the file, its target untouched
    assert target.read_text() == "keep me\n" and not link.is_symlink() and link.read_text() == drain_text(found, HOSTS)
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".rdmabench-")]  # no temporary left
    with pytest.raises(ResultsFileError, match="is a directory; give a file name"):
        write_drain_list(str(tmp_path), found, HOSTS, force=True)
    with pytest.raises(ResultsFileError, match="cannot write the drain list"):
        write_drain_list(str(tmp_path / "missing" / "drain.txt"), found, HOSTS)


def _renamed(fault: Fault, old: str, new: str, in_metadata: bool) -> tuple[Attribution, frozenset[str]]:
    """A crafted file: host `old` renamed `new` in its links (and, `in_metadata`, in its ranks' hosts)."""
    doc = generated(CLUSTER, "screen", fault, seed=2)
    for entry in doc["results"]:
        for end in ("src", "dst"):
            if entry[f"{end}_host"] == old:
                entry[f"{end}_host"] = new
    if in_metadata:
        doc["metadata"]["hosts"] = sorted(new if h == old else h for h in doc["metadata"]["hosts"])
    return attribute(aggregate([("crafted", doc)])), ran_on([("crafted", doc)])


@pytest.mark.parametrize("word", ["ALL", "all", "Default"])
def test_a_host_named_as_slurm_reads_every_node_is_never_drained(word: str) -> None:
    """`NodeName=ALL` is the whole cluster: a crafted file whose slow host is `ALL`, in its links and
    its ranks' hosts alike, is left out of the drain list, with a comment saying why."""
    found, hosts = _renamed(Fault("host", 5, direction="both", factor=0.5), "node005", word, in_metadata=True)
    assert word in hosts and found.suspects[0].host == word
    assert drains(found, hosts) == []
    assert refusals(found, hosts) == {word: f"host '{word}' is a word Slurm reads as a set of nodes"}
    text = drain_text(found, hosts)
    assert f"\n# not drained, refused: host '{word}' is a word Slurm reads as a set of nodes\n" in text
    assert "scontrol update" not in text and "# hostlist: (none)" in text


def test_a_host_the_runs_ranks_never_ran_on_is_never_drained() -> None:
    """A name in the links only (`gpu`: a Slurm node set drains the set) is not a host of the run."""
    found, hosts = _renamed(Fault("host", 5, direction="both", factor=0.5), "node005", "gpu", in_metadata=False)
    assert found.suspects[0].host == "gpu" and "gpu" not in hosts
    assert drains(found, hosts) == [] and "scontrol update" not in drain_text(found, hosts)
    assert "# not drained, refused: host 'gpu' is not one the results' ranks ran on" in drain_text(found, hosts)
    nothing_recorded = _found(Fault("host", 5, direction="both", factor=0.5))
    assert drains(nothing_recorded, frozenset()) == []
    assert "not one the results' ranks ran on" in refusals(nothing_recorded, frozenset())["node005"]


def test_the_drain_list_says_how_many_hosts_it_drains_of_how_many() -> None:
    assert "\n# drains 1 of 16 hosts the results' ranks ran on\n" in drain_text(
        _found(Fault("nic", 3, 1, "send", factor=0.6)), HOSTS
    )
    assert "# drains 0 of 16 hosts" in drain_text(_found(Fault("none")), HOSTS)
