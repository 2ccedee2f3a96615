"""A block table replayed from a file (--blocks-from): the block lists an engine's allocator left, as
JSON. The block size, then for each transfer the slots it moves at the end that posts it (`local`:
a put's or a tagged message's sender, a get's receiver, as NIXL and vLLM name them) and at the peer
(`remote`), each item either a slot (a block id) or [byte offset, byte length] with both whole
multiples of the block size (a descriptor of several blocks in adjacent slots):

    {"block_size": 16384,
     "transfers": [{"local": [12, 13, 14, 40], "remote": [7, 8, 9, 3]},
                   {"local": [[327680, 49152], 41], "remote": [[0, 49152], 30]}]}

Every transfer moves the same number of blocks (they are posted as one batch of equal lists), no slot
is named twice at one end of a step (each block is checked where it lands), and a step holds at most
blocks.MAX_BLOCKS blocks. The file is read whole, bounded in size, never through another user's link.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from .. import privatedirs, userfiles
from ..errors import ConfigError, FileRefusedError, UnsafePathError
from ..escape import visible
from .blocks import MAX_BLOCKS
from .slow import Slow

FILE_LIMIT = 64 << 20  # bytes: a million descriptors as [offset, length] pairs take about 40 MiB
MAX_SLOT = (1 << 31) - 1  # slot ids as NIXL's and vLLM's tables hold them (int32)
_KEYS = {"block_size", "transfers"}


class TableRecord(TypedDict):
    """What a results entry keeps of where its lists came from (the block list's "table",
    docs/results-format.md)."""

    file: str
    sha256: str
    transfers: int
    blocks_per_transfer: int
    local_descriptors: int
    remote_descriptors: int


@dataclass(frozen=True, eq=False)
class BlockTable:
    """A table as read: each end's slot of every block of a step, transfer by transfer."""

    source: str  # the file's path as given, escaped for display
    sha256: str
    block_size: int
    transfers: int
    count: int  # blocks per transfer
    descriptors: tuple[int, int]  # the file's items at the local and the remote end
    local: np.ndarray
    remote: np.ndarray
    get: bool = False  # oriented for a get: the local end receives

    def oriented(self, get: bool) -> BlockTable:
        """The table for an operation whose initiator is the source (put, tagged) or, `get`, the destination."""
        return self if get == self.get else dataclasses.replace(self, get=get)

    @property
    def src(self) -> np.ndarray:
        return self.remote if self.get else self.local

    @property
    def dst(self) -> np.ndarray:
        return self.local if self.get else self.remote

    @property
    def slots_needed(self) -> int:
        """Slots each end's pool needs: up to the highest slot either end names."""
        return int(max(self.local.max(), self.remote.max())) + 1

    def describe(self) -> str:
        return f"table {self.source} ({self.descriptors[0]} descriptors)"

    def record(self) -> TableRecord:
        """What a results entry keeps of where its lists came from."""
        return {
            "file": self.source, "sha256": self.sha256, "transfers": self.transfers, "blocks_per_transfer": self.count,
            "local_descriptors": self.descriptors[0], "remote_descriptors": self.descriptors[1],
        }  # fmt: skip


_PARSED: dict[tuple[str, str], BlockTable] = {}  # the last table parsed, by path and digest


def load(path: str, sha256: str | None = None) -> BlockTable:
    """The table in `path` (ConfigError in one line when it is not one); `sha256`: the digest it must
    still have (the ranks read the file the launcher checked)."""
    data = _read(path)
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise ConfigError(f"--blocks-from {visible(path)}: the file changed since the run was checked")
    found = _PARSED.get((path, digest))
    if found is None:
        with Slow(f"--blocks-from {visible(path)}", sha256 is None).during(
            "reading the table"
        ):  # said once: the launcher's
            found = _parse(path, data, digest)
        _PARSED.clear()
        _PARSED[(path, digest)] = found
    return found


def _read(path: str) -> bytes:
    """The file's bytes, at most FILE_LIMIT. A link is followed only where it and what it leads to are
    ours: the link, the file and its folder owned by us and nobody else's to write (privatedirs)."""
    shown = visible(path)
    try:
        found = os.lstat(path)
    except OSError as exc:
        raise FileRefusedError(f"--blocks-from {shown}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISLNK(found.st_mode):
        return userfiles.read_input(path, FILE_LIMIT, "block table", follow_links=False)
    if found.st_uid != os.geteuid():
        raise FileRefusedError(f"refusing --blocks-from {shown}: it is a symbolic link another user made")
    try:
        fd = privatedirs.open_in_private_dir(os.path.realpath(path), os.O_RDONLY | os.O_NONBLOCK)
    except UnsafePathError as exc:
        raise FileRefusedError(f"--blocks-from {shown} is a link: {exc}") from None
    except OSError as exc:
        raise FileRefusedError(f"--blocks-from {shown}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(FILE_LIMIT + 1)
    if len(data) > FILE_LIMIT:
        raise FileRefusedError(f"--blocks-from {shown}: larger than {FILE_LIMIT} bytes, the most a block table may be")
    return data


def _parse(path: str, data: bytes, digest: str) -> BlockTable:
    where = f"--blocks-from {visible(path)}"
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{where}: not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{where}: not a JSON object with block_size and transfers")
    unknown = sorted(set(document) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(visible(key) for key in unknown)}")
    missing = sorted(_KEYS - set(document))
    if missing:
        raise ConfigError(f"{where}: no {' and no '.join(missing)}")
    block = document["block_size"]
    if type(block) is not int or block < 8 or block % 8:
        raise ConfigError(f"{where}: block_size is bytes, a multiple of 8, not {visible(repr(block))[:40]}")
    transfers = document["transfers"]
    if not isinstance(transfers, list) or not transfers:
        raise ConfigError(f'{where}: transfers is a list of {{"local": [...], "remote": [...]}}, one a transfer')
    local, remote = _ends(transfers, block, where)
    for name, slots in (("local", local), ("remote", remote)):
        unique, counts = np.unique(slots, return_counts=True)
        if (counts > 1).any():
            raise ConfigError(f"{where}: {name} slot {int(unique[counts > 1][0])} is named twice in a step")
    count = len(local) // len(transfers)
    items = (sum(len(t["local"]) for t in transfers), sum(len(t["remote"]) for t in transfers))
    return BlockTable(visible(path), digest, block, len(transfers), count, items, local, remote)


def _ends(transfers: list[Any], block: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Each end's slots, transfer by transfer, as one array each. Linear in the table: slots are
    gathered into one list an end (counted as they come), made an array once."""
    ends: tuple[list[int], list[int]] = ([], [])
    first = 0  # blocks of transfer 0: every transfer moves as many
    for index, transfer in enumerate(transfers):
        if not isinstance(transfer, dict) or set(transfer) != {"local", "remote"}:
            raise ConfigError(f"{where}: transfer {index} is not an object of local and remote (and nothing else)")
        moved = [0, 0]
        for side, name in enumerate(("local", "remote")):
            before = len(ends[side])
            _slots(transfer[name], block, ends[side], f"{where}: transfer {index} {name}")
            moved[side] = len(ends[side]) - before
        if moved[0] != moved[1]:
            raise ConfigError(f"{where}: transfer {index} moves {moved[0]} blocks from local and {moved[1]} to remote")
        first = first or moved[0]
        if moved[0] != first:
            raise ConfigError(
                f"{where}: transfer {index} moves {moved[0]} blocks, transfer 0 {first}: "
                "a step's transfers move as many blocks each"
            )
    return np.array(ends[0], dtype=np.int64), np.array(ends[1], dtype=np.int64)


def _slots(items: Any, block: int, found: list[int], where: str) -> None:
    """The slots of one end of a transfer, added to `found` (the blocks at this end so far): slots as
    given, [offset, length] cut into blocks. Each item is a block at least: counted before it is made;
    each slot checked against MAX_SLOT before it is stored (a slot beyond 64 bits is refused, not
    overflowed)."""
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{where}: not a list of slots or [offset, length] pairs")
    if len(found) + len(items) > MAX_BLOCKS:
        raise ConfigError(f"{where}: more than {MAX_BLOCKS} blocks in a step")
    if all(type(item) is int for item in items):  # the common table: block ids
        wrong = [slot for slot in items if slot < 0 or slot > MAX_SLOT]
        if wrong:
            raise ConfigError(f"{where}: slot {str(wrong[0])[:40]} is not within 0 to {MAX_SLOT}")
        found.extend(items)
        return
    for index, item in enumerate(items):
        first, blocks = _item(item, block, f"{where} item {index}")
        if len(found) + blocks > MAX_BLOCKS:  # before the blocks are made: a terabyte's length is refused
            raise ConfigError(f"{where}: more than {MAX_BLOCKS} blocks in a step")
        found.extend(range(first, first + blocks))


def _item(item: Any, block: int, where: str) -> tuple[int, int]:
    """(first slot, blocks) of one item: a slot, or [offset, length] on slot boundaries."""
    if type(item) is int:
        first, blocks = item, 1
    elif isinstance(item, list) and len(item) == 2 and all(type(v) is int for v in item):
        offset, length = item
        if offset < 0 or offset % block or length < block or length % block:
            raise ConfigError(f"{where}: [{offset}, {length}] is not whole blocks of {block} bytes on a slot boundary")
        first, blocks = offset // block, length // block
    else:
        raise ConfigError(f"{where}: {visible(repr(item))[:40]} is neither a slot nor [offset, length]")
    if first < 0 or first + blocks - 1 > MAX_SLOT:
        raise ConfigError(f"{where}: slots {first} to {first + blocks - 1} are not within 0 to {MAX_SLOT}")
    return first, blocks
