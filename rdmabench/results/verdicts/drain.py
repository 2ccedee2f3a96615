"""The drain list: from a run's suspects, the hosts to take out of service, in Slurm's own words.

A host is drained when a suspect in it (a GPU, a rank, a NIC port, the host itself) reaches
`min_confidence`. A pair of hosts or a single link names a path between hosts (a cable, a switch
port): no host is drained for it; the list says so in a comment. The file holds the hostlist
(`node[003,017-018]`) and one `scontrol update NodeName=... State=DRAIN Reason="rdmabench: ..."`
line per host, for a person or a script to run: rdmabench never runs them. Host names must be
hostnames (hostlist.check_hostname); a reason keeps only letters, digits and ` ._:%/,()=+-`, so
nothing in it can end the quotes or reach a shell.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass

from ...errors import ResultsFileError
from .attribution import Attribution, Suspect
from .hostlist import check_hostname, compress

DRAINED_KINDS = ("gpu", "rank", "nic", "host")
MIN_CONFIDENCE = 0.5
REASON_LENGTH = 200  # characters of a reason (Slurm keeps it in its state files)
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._:%/,()=+-]")


@dataclass(frozen=True)
class Drain:
    host: str
    reason: str


def reason(text: str) -> str:
    """`text` as a Reason Slurm and a shell take as it is: unsafe characters become '_', one line."""
    return _UNSAFE.sub("_", text)[:REASON_LENGTH]


def _comment(text: str) -> str:
    """`text` as one comment line: no line breaks or other control characters."""
    return "".join(c if c.isprintable() else "_" for c in text)


def _why(suspect: Suspect) -> str:
    part = f"{suspect.kind} {suspect.device}" if suspect.device else suspect.kind
    return f"{part} {suspect.direction} at {suspect.ratio:.0%} of class median ({suspect.explained} links)"


def drains(found: Attribution, min_confidence: float = MIN_CONFIDENCE) -> list[Drain]:
    """One Drain per host holding a suspect part of at least `min_confidence`, by host name."""
    why: dict[str, list[str]] = {}
    for suspect in found.suspects:
        if suspect.kind in DRAINED_KINDS and suspect.confidence >= min_confidence:
            why.setdefault(check_hostname(suspect.host), []).append(_why(suspect))
    return [Drain(host, reason("rdmabench: " + "; ".join(parts))) for host, parts in sorted(why.items())]


def drained_hosts(found: Attribution, min_confidence: float = MIN_CONFIDENCE) -> list[str]:
    return [drain.host for drain in drains(found, min_confidence)]


def drain_text(found: Attribution, min_confidence: float = MIN_CONFIDENCE) -> str:
    """The drain list file: comments, the hostlist, one scontrol line per host."""
    chosen = drains(found, min_confidence)
    lines = [
        "# rdmabench drain list: review it, then run the scontrol lines (rdmabench never runs them)",
        f"# outcome: {found.outcome}; {len(found.suspects)} suspect(s), hosts drained at confidence >= {min_confidence}",
        f"# hostlist: {compress(d.host for d in chosen) if chosen else '(none)'}",
    ]
    for suspect in found.suspects:
        if suspect.kind not in DRAINED_KINDS:
            lines.append(f"# not drained, a path between hosts: {_comment(suspect.describe())}")
        elif suspect.confidence < min_confidence:
            lines.append(f"# not drained, confidence {suspect.confidence:.2f}: {_comment(suspect.describe())}")
    lines += [f'scontrol update NodeName={d.host} State=DRAIN Reason="{d.reason}"' for d in chosen]
    return "\n".join(lines) + "\n"


def write_drain_list(
    path: str, found: Attribution, min_confidence: float = MIN_CONFIDENCE, force: bool = False
) -> list[Drain]:
    """Write the drain list to `path` (a new file; an existing one only with `force`, replaced
    whole: never followed through a link, never half written); returns the hosts it drains."""
    text = drain_text(found, min_confidence)
    if os.path.isdir(path):
        raise ResultsFileError(f"drain list {path} is a directory; give a file name")
    if os.path.lexists(path) and not force:
        raise ResultsFileError(f"drain list {path} already exists; choose another path or pass --force")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".rdmabench-drain-", suffix=".tmp")  # ours, 0600
    except OSError as exc:
        raise ResultsFileError(f"cannot write the drain list {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o644 & ~mask)  # readable as the umask allows; never executable
        os.replace(temporary, path)  # renames over a link at `path`, never through it
    except OSError as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise ResultsFileError(f"cannot write the drain list {path}: {exc.strerror or exc}") from None
    return drains(found, min_confidence)
