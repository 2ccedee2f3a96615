"""The drain list against the cluster's real nodes: `check --nodes FILE` and `--nodes-from-slurm` (a
stand-in `sinfo` on PATH here: a script printing node names, as Slurm's prints them). A host the
results name that is no node of the cluster (`gpu`, `debug`: Slurm node-set names) is left out with a
comment; without either option the drain list says its names were not checked against the cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from devtools.diagnose import Cluster, Fault, generated
from rdmabench.errors import ConfigError
from rdmabench.results.verdicts.nodes import from_file

from .conftest import rdmabench_env, run_cli, run_cli_here

CLUSTER = Cluster(16, 4, 2)
NODES = [f"node{n:03d}" for n in range(16)]


def _crafted(tmp_path: Path) -> Path:
    """A run whose slow host is named `gpu` (a Slurm node set) in its links and its ranks alike."""
    doc = generated(CLUSTER, "screen", Fault("host", 5, direction="both", factor=0.5), seed=3)
    for entry in doc["results"]:
        for end in ("src", "dst"):
            entry[f"{end}_host"] = "gpu" if entry[f"{end}_host"] == "node005" else entry[f"{end}_host"]
    doc["metadata"]["hosts"] = ["gpu" if h == "node005" else h for h in doc["metadata"]["hosts"]]
    for rank in doc["metadata"]["ranks"]:
        rank["host"] = "gpu" if rank["host"] == "node005" else rank["host"]
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(doc))
    return path


def _screen(tmp_path: Path) -> Path:
    path = tmp_path / "screen.json"
    path.write_text(json.dumps(generated(CLUSTER, "screen", Fault("nic", 5, 1, "send", factor=0.8), seed=3)))
    return path


def _check(results: Path, drain: Path, *more: str, env: dict[str, str] | None = None) -> list[str]:
    proc = run_cli(["check", str(results), "--expect", "default", "--drain", str(drain), *more], env=env)
    assert proc.returncode == 1, proc.stderr
    return proc.stdout.splitlines()


def test_without_a_node_list_the_drain_list_says_its_names_were_not_checked(tmp_path: Path) -> None:
    drain = tmp_path / "drain.txt"
    _check(_crafted(tmp_path), drain)
    text = drain.read_text()
    assert "# host names NOT checked against the cluster's nodes (check --nodes FILE or --nodes-from-slurm)" in text
    assert "NodeName=gpu " in text  # the run's own metadata vouches for it: only a node list tells


def test_a_node_list_drains_only_the_clusters_nodes(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("# the cluster\n" + "\n".join(NODES) + "\n\n")
    drain = tmp_path / "drain.txt"
    lines = _check(_crafted(tmp_path), drain, "--nodes", str(nodes))
    assert lines[-1] == f"drain list: {drain} (no host: 0 of 16 hosts; 1 refused: gpu)"
    text = drain.read_text()
    assert "NodeName=gpu" not in text and "\nscontrol " not in text
    assert f"# not drained, refused: host 'gpu' is not a node of the cluster (--nodes {nodes})" in text
    assert f"# host names checked against 16 nodes of the cluster (--nodes {nodes})" in text
    screen_drain = tmp_path / "screen-drain.txt"
    lines = _check(_screen(tmp_path), screen_drain, "--nodes", str(nodes))
    assert lines[-1] == f"drain list: {screen_drain} (node005: 1 of 16 hosts)"
    assert "scontrol update NodeName=node005 State=DRAIN" in screen_drain.read_text()


def _fake_slurm(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    """An environment whose PATH finds `name` (a shell script of `body`) first, and no other Slurm."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    env = rdmabench_env()
    env["PATH"] = f"{bin_dir}:{os.path.dirname(os.path.realpath('/bin/sh'))}"
    return env


def test_nodes_from_slurm_reads_sinfo(tmp_path: Path) -> None:
    listed = " ".join(NODES + NODES[:4])  # sinfo -N lists a node once per partition
    env = _fake_slurm(tmp_path, "sinfo", f'[ "$*" = "-N -h -o %N" ] || exit 9\nfor n in {listed}; do echo $n; done')
    drain = tmp_path / "drain.txt"
    lines = _check(_crafted(tmp_path), drain, "--nodes-from-slurm", env=env)
    assert lines[-1] == f"drain list: {drain} (no host: 0 of 16 hosts; 1 refused: gpu)"
    text = drain.read_text()
    assert "host 'gpu' is not a node of the cluster (sinfo -N -h -o %N)" in text
    assert "# host names checked against 16 nodes of the cluster (sinfo -N -h -o %N)" in text


def test_nodes_from_slurm_falls_back_to_scontrol(tmp_path: Path) -> None:
    env = _fake_slurm(tmp_path, "scontrol", f'[ "$*" = "show hostnames" ] || exit 9\necho "{chr(10).join(NODES)}"')
    drain = tmp_path / "drain.txt"
    _check(_screen(tmp_path), drain, "--nodes-from-slurm", env=env)
    assert "checked against 16 nodes of the cluster (scontrol show hostnames)" in drain.read_text()


def test_where_slurm_is_present_the_drain_list_is_checked_against_it_by_default(tmp_path: Path) -> None:
    """A drain list written without a node list named `gpu` unchecked, though sinfo was on PATH."""
    env = _fake_slurm(tmp_path, "sinfo", f'[ "$*" = "-N -h -o %N" ] || exit 9\necho "{chr(10).join(NODES)}"')
    drain = tmp_path / "drain.txt"
    lines = _check(_crafted(tmp_path), drain, env=env)
    assert lines[-1] == f"drain list: {drain} (no host: 0 of 16 hosts; 1 refused: gpu)"
    text = drain.read_text()
    assert "NodeName=gpu" not in text and "# host names checked against 16 nodes of the cluster (sinfo" in text


def test_a_name_slurm_cannot_check_is_left_out_not_written_unchecked(tmp_path: Path) -> None:
    env = _fake_slurm(tmp_path, "sinfo", "echo 'sinfo: error: no controller' >&2; exit 1")
    drain = tmp_path / "drain.txt"
    lines = _check(_screen(tmp_path), drain, env=env)
    assert lines[-1] == f"drain list: {drain} (no host: 0 of 16 hosts; 1 refused: node005)"
    text = drain.read_text()
    assert "\nscontrol " not in text and "could not be checked against the cluster's nodes" in text
    assert "sinfo -N -h -o %N failed (exit 1): sinfo: error: no controller" in text


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        (None, "", "--nodes-from-slurm: no Slurm here (neither sinfo nor scontrol on PATH)"),
        ("sinfo", "echo 'sinfo: error: no controller' >&2; exit 1", "sinfo -N -h -o %N failed (exit 1): sinfo: error"),
        ("sinfo", "echo 'node[1-2]'", "sinfo -N -h -o %N line 1: 'node[1-2]' is not a hostname"),
        ("sinfo", "true", "sinfo -N -h -o %N named no node"),
    ],
)
def test_nodes_from_slurm_refuses_in_one_line(tmp_path: Path, name: str | None, body: str, says: str) -> None:
    env = _fake_slurm(tmp_path, name or "unrelated", body)
    drain = tmp_path / "drain.txt"
    proc = run_cli(
        ["check", str(_screen(tmp_path)), "--expect", "default", "--drain", str(drain), "--nodes-from-slurm"], env=env
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
    assert not drain.exists() and not proc.stdout


def test_a_node_list_file_is_read_by_our_rules(tmp_path: Path) -> None:
    good = tmp_path / "nodes.txt"
    good.write_text("node001\n  node002  \n# comment\n\nnode001\n")
    assert from_file(str(good)).names == frozenset({"node001", "node002"})
    bad = tmp_path / "bad.txt"
    bad.write_text("node001\nALL,node2\n")
    with pytest.raises(ConfigError, match=r"line 2: 'ALL,node2' is not a hostname"):
        from_file(str(bad))
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="named no node"):
        from_file(str(empty))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        from_file(str(fifo))
    binary = tmp_path / "binary"
    binary.write_bytes(b"node\xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        from_file(str(binary))


def test_node_options_are_refused_without_a_drain_list_or_together(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("node001\n")
    screen = str(_screen(tmp_path))
    proc = run_cli_here(["check", screen, "--expect", "default", "--nodes", str(nodes)])
    assert proc.returncode == 2 and "--nodes and --nodes-from-slurm only with --drain" in proc.stderr
    drain = str(tmp_path / "d.txt")
    both = ["--nodes", str(nodes), "--nodes-from-slurm", "--drain", drain]
    proc = run_cli_here(["check", screen, "--expect", "default", *both])
    assert proc.returncode == 2 and "give --nodes FILE or --nodes-from-slurm, not both" in proc.stderr
