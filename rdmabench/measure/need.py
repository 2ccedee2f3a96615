"""What one rank allocates for one round, before it allocates it: each step protocol's `need` adds up
its buffers with the helpers here, so the preflight can refuse a run that cannot fit (an
out-of-memory kill mid-run helps nobody) and name what it would have needed.

Everything a round holds counts: the message buffers (window x links, in each end's memory), the
payload pattern and the comparison of a check beside them, the pinned staging buffers of a staged
end, and what every message or block in flight costs the loop and UCX (a request each, slots and
offset arrays), which for a block list of a million blocks is gigabytes on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..memory.buffers import word_capacity
from ..modes import MemoryMode
from ..wire.staging import pieces

# What a message or block in flight costs beside its bytes: UCX's request (about 1 KiB a block,
# measured with UCX 1.21 as a rank's peak RSS over puts and gets of 8-byte blocks: 620 MB more at
# 600,000 blocks), the native loop's request slot, and in Python a tag and a request object.
PER_MESSAGE = 1280
# The Python side of each block of a block list: its slot, offsets (local and remote, with the
# temporaries that compute them), the requests merged from them (offsets and lengths), its payload
# key and a check's count per block.
PER_BLOCK_PYTHON = 192


@dataclass(frozen=True)
class Need:
    """Bytes a rank allocates: host memory (page-locked included), of which page-locked, and GPU memory."""

    host: int = 0
    pinned: int = 0
    device: int = 0

    def __add__(self, other: Need) -> Need:
        return Need(self.host + other.host, self.pinned + other.pinned, self.device + other.device)

    def most(self, other: Need) -> Need:
        """The larger of each kind: what rounds run one after the other hold at most."""
        return Need(max(self.host, other.host), max(self.pinned, other.pinned), max(self.device, other.device))


def in_memory(mode: MemoryMode, nbytes: int) -> Need:
    """`nbytes` of buffers in `mode`: on the GPU, page-locked host memory, or host memory."""
    if mode.on_device:
        return Need(device=nbytes)
    if mode.pinned_host:
        return Need(host=nbytes, pinned=nbytes)
    return Need(host=nbytes)  # pageable, or memory UCX allocates in the host


def beside(mode: MemoryMode, nbytes: int) -> Need:
    """Working arrays (patterns, comparisons) that live where a buffer in `mode` is checked: on the
    GPU for device memory, else in ordinary host memory."""
    return Need(device=nbytes) if mode.on_device else Need(host=nbytes)


def message_end(
    mode: MemoryMode,
    size: int,
    count: int,
    distinct: int,
    checks: bool | None,
    chunk: int,
    staging_count: int | None,
) -> Need:
    """One end of one link that posts `count` messages of `size` from `distinct` buffers in `mode`:
    the buffers; the pattern and its scratch (validated: `checks` not None), and a check's
    element-wise comparison where this end `checks` what it received; the pinned staging buffers of
    `chunk` bytes (`staging_count` of them, for a staged end); and each message's request."""
    capacity = word_capacity(size)
    need = in_memory(mode, distinct * capacity)
    if checks is not None:
        need += beside(mode, (3 if checks else 2) * capacity)
    if staging_count is not None:
        need += in_memory(MemoryMode.PINNED, staging_count * word_capacity(chunk))
    return need + Need(host=PER_MESSAGE * count * pieces(size, chunk))
