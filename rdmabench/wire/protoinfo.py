"""What UCX chose: parse the protocol-selection tables that UCX prints with UCX_PROTO_INFO=y.

A table looks like this (log prefixes removed):

    | ucp_context_1 intra-node cfg#0 | tagged message by ucp_tag_send* from host memory |
    |                          0..92 | eager short                               | sysv/memory |
    |                        8K..inf | (?) rendezvous zero-copy read from remote | cma/memory  |

Each table belongs to one endpoint configuration (cfg#N), one operation and one memory type, and maps
message-size ranges to a protocol and the transports (transport/device) that carry it.

Later UCX versions (NIXL bundles one) print the same table with its header on two lines and a row
naming the columns:

    | agent intra-node cfg#1                                   |
    | remote memory write by ucp_put* from host memory to host |
    | Range  | Description | Config                            |
    | 0..inf | zero-copy   | cma/memory                        |
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The memory part reads "host memory" or, where UCX knows the device, "cuda/GPU0".
_HEADER_RE = re.compile(r"\|\s*(\S+)\s+(intra-node|inter-node)\s+cfg#(\d+)\s*\|\s*(.+?)\s+(?:from|into)\s+(.+?)\s*\|")
# The two-line header: the configuration alone on its line, then the operation alone on the next.
_CONFIG_LINE_RE = re.compile(r"\|\s*(\S+)\s+(intra-node|inter-node)\s+cfg#(\d+)\s*\|\s*$")
_OPERATION_LINE_RE = re.compile(r"\|\s*(.+?)\s+(?:from|into)\s+(.+?)\s*\|\s*$")
_COLUMNS_RE = re.compile(r"\|\s*Range\s*\|\s*Description\s*\|\s*Config\s*\|")
_MEMORY_TYPE_RE = re.compile(r"[A-Za-z_-]+")
_ROW_RE = re.compile(r"\|\s*(\d+[KMGT]?)\.\.(\d+[KMGT]?|inf)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")
_SINGLE_ROW_RE = re.compile(r"\|\s*(\d+[KMGT]?)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")
_MULT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

TAG_SEND = "tagged message by ucp_tag_send*"
# Rendezvous data movement: pushed by the sender after the receiver asked for it (RTR), or fetched
# (read) by the receiver. Which one happened shows in which table has a definite row ("(?)" marks a
# tentative one that the other side may override).
RNDV_SEND = "rendezvous data send"
RNDV_FETCH = "rendezvous data fetch"
TENTATIVE = "(?)"
# One-sided operations: the initiator's table ("... from host memory to cuda", "... into host memory from host").
RMA_PUT = "remote memory write by ucp_put*"
RMA_GET = "remote memory read by ucp_get*"


@dataclass(frozen=True)
class ProtoRow:
    low: float
    high: float
    protocol: str
    transport: str


@dataclass(frozen=True)
class TagRows:
    """What one rank's UCX reported for a tagged link's messages of one size: as their sender, its
    tag-send and rendezvous-push rows; as their receiver, its rendezvous-fetch row; None where UCX
    printed none (or no table of the endpoint's configuration at all: then locality is None too)."""

    tag: ProtoRow | None = None
    send: ProtoRow | None = None
    fetch: ProtoRow | None = None
    locality: str | None = None  # "intra-node" or "inter-node"


@dataclass(frozen=True)
class RmaRows:
    """What the initiator's UCX reported for a one-sided link's `operation` (RMA_PUT, RMA_GET, or the
    call a device-posted block list made) of one size: the row that names the transport."""

    operation: str
    rma: ProtoRow | None = None
    locality: str | None = None


# A timed link's report rows, as the rank that timed it read them.
PathRows = TagRows | RmaRows


def _size(text: str) -> float:
    if text == "inf":
        return float("inf")
    if text[-1] in _MULT:
        return float(text[:-1]) * _MULT[text[-1]]
    return float(text)


@dataclass
class ProtoTable:
    context: str
    locality: str  # "intra-node" or "inter-node"
    config: int
    operation: str
    memory: str  # this process's memory: "host", "cuda", ...
    memory_text: str  # as UCX printed it: "host memory", "cuda/GPU0 from host", ...
    peer_memory: str | None  # the other side's memory, for rendezvous data tables
    rows: list[ProtoRow] = field(default_factory=list)

    def lookup(self, nbytes: int) -> ProtoRow | None:
        for row in self.rows:
            if row.low <= nbytes <= row.high:
                return row
        return None


def parse_tables(text: str) -> list[ProtoTable]:
    """Every protocol-selection table in a UCX log, in order of appearance (either header's form)."""
    tables: list[ProtoTable] = []
    current: ProtoTable | None = None
    config: tuple[str, ...] | None = None  # a two-line header's first line, until its second
    for line in text.splitlines():
        header = _HEADER_RE.search(line)
        operation = _OPERATION_LINE_RE.search(line) if config is not None else None
        if header or operation:
            found = header.groups() if header else (*(config or ()), *operation.groups())  # type: ignore[union-attr]
            current, config = _table(*found), None
            tables.append(current)
            continue
        config = None
        two_line = _CONFIG_LINE_RE.search(line)
        if two_line:
            config, current = two_line.groups(), None
            continue
        if current is None:
            continue
        row = _ROW_RE.search(line)
        if row:
            low, high, protocol, transport = row.groups()
            current.rows.append(ProtoRow(_size(low), _size(high), protocol, transport))
            continue
        single = _SINGLE_ROW_RE.search(line)
        if single:
            value, protocol, transport = single.groups()
            current.rows.append(ProtoRow(_size(value), _size(value), protocol, transport))
            continue
        if "+--" in line or _COLUMNS_RE.search(line):
            continue
        current = None
    return tables


def _table(context: str, locality: str, config: str, operation: str, memory_text: str) -> ProtoTable:
    kinds = _MEMORY_TYPE_RE.findall(memory_text.replace(" memory", " "))
    words = [k for k in kinds if k not in ("to", "from", "GPU")]
    memory = words[0] if words else memory_text
    peer = words[1] if len(words) > 1 else None
    return ProtoTable(context, locality, int(config), operation.strip(), memory, memory_text, peer)


def is_plain_tag_send(table: ProtoTable) -> bool:
    """The plain tag-send table (not the fast-completion or multi variants UCX also prints)."""
    return table.operation == TAG_SEND


def is_tentative(row: ProtoRow) -> bool:
    return row.protocol.startswith(TENTATIVE)


def resolve(
    tag_row: ProtoRow | None, send_row: ProtoRow | None, fetch_row: ProtoRow | None
) -> tuple[ProtoRow | None, str]:
    """The row that describes how a message's bytes moved, and which table it came from.

    Eager messages travel as the sender's tag-send row says. A rendezvous message's bytes move as the
    rendezvous data table says: the sender's push (data send) or the receiver's read (data fetch),
    whichever UCX settled on (a row without "(?)"); failing both, the tag-send row's own choice.
    """
    if tag_row is None or "rendezvous" not in tag_row.protocol:
        return tag_row, "tag send"
    for row, source in ((send_row, "rendezvous data send"), (fetch_row, "rendezvous data fetch")):
        if row is not None and not is_tentative(row) and row.transport:
            return row, source
    return tag_row, "tag send"
