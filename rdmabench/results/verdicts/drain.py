"""The drain list: from a run's suspects, the hosts to take out of service, in Slurm's own words.

A host is drained when a suspect in it (a GPU, a rank, a NIC port, the host itself) reaches
`min_confidence`. A pair of hosts or a single link names a path between hosts (a cable, a switch
port): no host is drained for it; the list says so in a comment. The file holds the hostlist
(`node[003,017-018]`) and one `scontrol update NodeName=... State=DRAIN Reason="rdmabench: ..."`
line per host, for a person or a script to run: rdmabench never runs them. A reason keeps only
letters, digits and ` ._:%/,()=+-`, so nothing in it can end the quotes or reach a shell.

A results file is someone's text, and a host name in it becomes a Slurm node expression: `ALL` is
every node, `node[1-100]` or `a,b` a set. So every host a drain list names passes one check
(drainable): a hostname (hostlist.check_hostname: no brackets, commas or spaces), not a word Slurm
reserves, one the results files' own ranks ran on (their metadata: `hosts`, the rank table), and,
given the cluster's nodes (nodes.ClusterNodes: `check --nodes`, `--nodes-from-slurm`), one of them;
without them the list says its names were not checked against the cluster. A
host that fails it is left out of the list with a comment saying why (`refusals`): one crafted file
costs only its own hosts, never the verdict nor the other hosts' lines. The list says how many hosts
it drains out of how many there were.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ... import userfiles
from ...errors import ConfigError, FileRefusedError, OutputWriteError
from ...escape import visible
from ..files.docrecord import ResultsDocument
from .attribution import Attribution, Suspect
from .hostlist import check_hostname, compress
from .nodes import ClusterNodes

DRAINED_KINDS = ("gpu", "rank", "nic", "host")
MIN_CONFIDENCE = 0.5
SHOWN_REFUSED = 5  # refused hosts named on check's drain line (the file names them all)
REASON_LENGTH = 200  # characters of a reason (Slurm keeps it in its state files)
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._:%/,()=+-]")


# Words Slurm reads as more than one node where a node name goes (`NodeName=ALL` is every node).
SLURM_RESERVED = frozenset({"all", "default"})


@dataclass(frozen=True)
class Drain:
    host: str
    reason: str


def ran_on(documents: Iterable[tuple[str, ResultsDocument]]) -> frozenset[str]:
    """The hosts the ranks of these results files ran on, as their metadata (`hosts`, `ranks`) and
    a schema-2 file's rank table record them."""
    found: set[str] = set()
    for _path, doc in documents:
        metadata = doc.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        for hosts in (metadata.get("hosts"), metadata.get("ranks"), doc.get("ranks")):
            for item in hosts if isinstance(hosts, list) else []:
                host = item.get("host") if isinstance(item, dict) else item
                if isinstance(host, str):
                    found.add(host)
    return frozenset(found)


def drainable(host: str, hosts: frozenset[str], nodes: ClusterNodes | None = None) -> str:
    """`host`, or a ConfigError saying why a drain list must not name it: not a hostname, a word
    Slurm reads as a set of nodes, no host the run's ranks (`hosts`) ran on, or, given the cluster's
    `nodes`, none of them."""
    check_hostname(host)
    if host.lower() in SLURM_RESERVED:
        raise ConfigError(f"host {host!r} is a word Slurm reads as a set of nodes: refused in a drain list")
    if host not in hosts:
        raise ConfigError(
            f"host {host!r} is not one the results' ranks ran on (their metadata): refused in a drain list"
        )
    if nodes is not None and nodes.unread is not None:
        raise ConfigError(f"host {host!r} could not be checked against the cluster's nodes ({nodes.unread})")
    if nodes is not None and host not in nodes.names:
        raise ConfigError(f"host {host!r} is not a node of the cluster ({nodes.source}): refused in a drain list")
    return host


def reason(text: str) -> str:
    """`text` as a Reason Slurm and a shell take as it is: unsafe characters become '_', one line."""
    return _UNSAFE.sub("_", text)[:REASON_LENGTH]


def _comment(text: str) -> str:
    """`text` as one comment line: no line breaks or other control characters."""
    return "".join(c if c.isprintable() else "_" for c in text)


def _why(suspect: Suspect) -> str:
    part = f"{suspect.kind} {suspect.device}" if suspect.device else suspect.kind
    return f"{part} {suspect.direction} at {suspect.ratio:.0%} of class median ({suspect.explained} links)"


def _sorted_out(
    found: Attribution, hosts: frozenset[str], min_confidence: float, nodes: ClusterNodes | None
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The drainable hosts with why each is drained, and the refused ones with why not (drainable)."""
    why: dict[str, list[str]] = {}
    refused: dict[str, str] = {}
    for suspect in found.suspects:
        if suspect.kind in DRAINED_KINDS and suspect.confidence >= min_confidence:
            try:
                why.setdefault(drainable(suspect.host, hosts, nodes), []).append(_why(suspect))
            except ConfigError as exc:
                refused[suspect.host] = str(exc).removesuffix(": refused in a drain list")
    return why, refused


def drains(
    found: Attribution,
    hosts: frozenset[str],
    min_confidence: float = MIN_CONFIDENCE,
    nodes: ClusterNodes | None = None,
) -> list[Drain]:
    """One Drain per host holding a suspect part of at least `min_confidence`, by host name; each
    host checked (drainable) against `hosts`, those the run's ranks ran on (ran_on), and the cluster's
    `nodes` where given: one refused is left out (refusals)."""
    why, _refused = _sorted_out(found, hosts, min_confidence, nodes)
    return [Drain(host, reason("rdmabench: " + "; ".join(parts))) for host, parts in sorted(why.items())]


def refusals(
    found: Attribution,
    hosts: frozenset[str],
    min_confidence: float = MIN_CONFIDENCE,
    nodes: ClusterNodes | None = None,
) -> dict[str, str]:
    """The hosts of suspect parts a drain list must not name (drainable), each with why."""
    return _sorted_out(found, hosts, min_confidence, nodes)[1]


def drained_hosts(found: Attribution, hosts: frozenset[str], min_confidence: float = MIN_CONFIDENCE) -> list[str]:
    return [drain.host for drain in drains(found, hosts, min_confidence)]


def share(chosen: list[Drain], hosts: frozenset[str], refused: Iterable[str] = ()) -> str:
    """How many hosts a drain list drains of how many the run had, and those it refused by name
    (the first few, escaped): '1 of 16 hosts', '1 of 32 hosts; 1 refused: ALL'."""
    text = f"{len(chosen)} of {len(hosts)} host{'s' if len(hosts) != 1 else ''}"
    names = sorted(refused)
    if names:
        shown = ", ".join(visible(name) for name in names[:SHOWN_REFUSED])
        text += f"; {len(names)} refused: {shown}{', ...' if len(names) > SHOWN_REFUSED else ''}"
    return text


def _checked_against(nodes: ClusterNodes | None) -> str:
    if nodes is None:
        return (
            "# host names NOT checked against the cluster's nodes (check --nodes FILE or --nodes-from-slurm): "
            "a results file vouches for its own; review each name before you run its line"
        )
    if nodes.unread is not None:
        return f"# host names could not be checked against the cluster's nodes, so none is drained: {_comment(nodes.unread)}"
    return f"# host names checked against {len(nodes.names)} nodes of the cluster ({_comment(nodes.source)})"


def drain_text(
    found: Attribution,
    hosts: frozenset[str],
    min_confidence: float = MIN_CONFIDENCE,
    nodes: ClusterNodes | None = None,
) -> str:
    """The drain list file: comments, the hostlist, one scontrol line per host."""
    chosen = drains(found, hosts, min_confidence, nodes)
    lines = [
        "# rdmabench drain list: review it, then run the scontrol lines (rdmabench never runs them)",
        f"# outcome: {found.outcome}; {len(found.suspects)} suspect(s), hosts drained at confidence >= {min_confidence}",
        f"# hostlist: {compress(d.host for d in chosen) if chosen else '(none)'}",
        f"# drains {share(chosen, hosts)} the results' ranks ran on",
        _checked_against(nodes),
    ]
    for suspect in found.suspects:
        if suspect.kind not in DRAINED_KINDS:
            lines.append(f"# not drained, a path between hosts: {_comment(suspect.describe())}")
        elif suspect.confidence < min_confidence:
            lines.append(f"# not drained, confidence {suspect.confidence:.2f}: {_comment(suspect.describe())}")
    lines += [
        f"# not drained, refused: {_comment(why)}"
        for _host, why in sorted(refusals(found, hosts, min_confidence, nodes).items())
    ]
    lines += [f'scontrol update NodeName={d.host} State=DRAIN Reason="{d.reason}"' for d in chosen]
    return "\n".join(lines) + "\n"


def write_drain_list(
    path: str,
    found: Attribution,
    hosts: frozenset[str],
    min_confidence: float = MIN_CONFIDENCE,
    force: bool = False,
    nodes: ClusterNodes | None = None,
) -> list[Drain]:
    """Write the drain list to `path` (a new file; an existing one only with `force`, replaced
    whole: never followed through a link, never half written); returns the hosts it drains."""
    text = drain_text(found, hosts, min_confidence, nodes)
    if os.path.isdir(path):
        raise FileRefusedError(f"drain list {path} is a directory; give a file name")
    if os.path.lexists(path) and not force:
        raise FileRefusedError(f"drain list {path} already exists; choose another path or pass --force")
    try:  # beside `path`, 0644 less the umask, renamed over it: never through a link, never half written
        userfiles.write_text(path, text)
    except OSError as exc:
        raise OutputWriteError(f"cannot write the drain list {path}: {exc.strerror or exc}") from None
    return drains(found, hosts, min_confidence, nodes)
