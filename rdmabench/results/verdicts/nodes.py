"""The cluster's real nodes, the allow-list a drain list is checked against: a file the user names
(`check --nodes FILE`, one node name per line) or Slurm's own list (`--nodes-from-slurm`:
`sinfo -N -h -o %N`, or `scontrol show hostnames` where only scontrol is on PATH), which a drain list
is checked against by default where Slurm is on PATH (`by_default`).

A results file's metadata vouches only for itself: a crafted one may name its host `gpu` or `debug`
(Slurm node-set names) and list it as a host its ranks ran on. A name the cluster does not list is
never drained (drain.drainable). Every read is bounded: the file by `userfiles.read_input`, Slurm's
output by NODES_LIMIT bytes and TIMEOUT_S seconds; every name must be a hostname.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from ... import userfiles
from ...errors import ConfigError
from ...escape import visible
from .hostlist import is_hostname

NODES_LIMIT = 64 << 20  # bytes of a node list: a million nodes of 60-character names
TIMEOUT_S = 60.0  # seconds Slurm may take to list its nodes
SLURM_COMMANDS = (("sinfo", "-N", "-h", "-o", "%N"), ("scontrol", "show", "hostnames"))


@dataclass(frozen=True)
class ClusterNodes:
    """The cluster's node names and where they came from (`--nodes FILE`, `sinfo -N -h -o %N`)."""

    names: frozenset[str]
    source: str
    unread: str | None = None  # why the list could not be had (Slurm failed): every name left out


def _parse(text: str, source: str) -> ClusterNodes:
    """One node name a line; blank lines and `#` comments skipped; each a hostname."""
    names: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        if not is_hostname(name):
            raise ConfigError(
                f"{source} line {number}: {visible(repr(name[:80]))} is not a hostname (one node name a line)"
            )
        names.add(name)
    if not names:
        raise ConfigError(f"{source} named no node: a drain list checked against it could drain none")
    return ClusterNodes(frozenset(names), source)


def from_file(path: str) -> ClusterNodes:
    """The nodes a file names, one a line (a regular file of at most NODES_LIMIT bytes, UTF-8)."""
    source = f"--nodes {visible(path)}"
    data = userfiles.read_input(path, NODES_LIMIT, "node list")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    return _parse(text, source)


def slurm_present() -> bool:
    """Whether Slurm's commands are on PATH (sinfo or scontrol): a cluster that can say its nodes."""
    return any(shutil.which(command[0]) is not None for command in SLURM_COMMANDS)


def by_default() -> ClusterNodes | None:
    """The nodes a drain list is checked against when none were named: Slurm's where it is present
    (from_slurm), and where its list cannot be had, a list that leaves every name out saying why
    (never a name written unchecked on a cluster that could have told); None without Slurm."""
    if not slurm_present():
        return None
    try:
        return from_slurm()
    except ConfigError as exc:
        return ClusterNodes(frozenset(), "Slurm, asked by default", unread=str(exc))


def from_slurm() -> ClusterNodes:
    """The nodes Slurm lists: the first of SLURM_COMMANDS on PATH, its output bounded and parsed."""
    for command in SLURM_COMMANDS:
        program = shutil.which(command[0])
        if program is not None:
            return _run(program, command)
    raise ConfigError("--nodes-from-slurm: no Slurm here (neither sinfo nor scontrol on PATH); give --nodes FILE")


def _run(program: str, command: tuple[str, ...]) -> ClusterNodes:
    """`command`'s node list: its output goes to unnamed files, read back at most NODES_LIMIT bytes."""
    source = " ".join(command)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run(
                [program, *command[1:]],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(f"{source} gave no node list in {TIMEOUT_S:.0f} s") from None
        except OSError as exc:
            raise ConfigError(f"{source} could not start: {exc.strerror or exc}") from None
        out.seek(0)
        err.seek(0)
        data, said = out.read(NODES_LIMIT + 1), err.read(4096).decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0:
        first = visible(said[0][:200]) if said else "no message"
        raise ConfigError(f"{source} failed (exit {done.returncode}): {first}")
    if len(data) > NODES_LIMIT:
        raise ConfigError(f"{source}: over {NODES_LIMIT} bytes of node names")
    return _parse(data.decode("utf-8", "replace"), source)
