"""What a results entry gives its row: its link's name and class, its ends' memory-mode labels, its load,
its figure, and the settings that must match before two runs of a link are merged. An entry's own
records (its block list and its figure beside compute) are read back once (`records_of`) and passed on
as typed records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...measure.besiderecord import CARVEOUT, BesideFigure
from ...measure.blockrecord import BlockList
from ...measure.postings import posting
from ...measure.readback import number
from ...modes import mode_named
from ...units import format_size
from .contents import figure_field

LINK_CLASSES = ("same GPU", "intra-node", "inter-node")


def link_class(entry: Mapping[str, object]) -> str:
    if entry.get("src_host") != entry.get("dst_host"):
        return "inter-node"
    if (
        entry.get("src_gpu") is not None
        and entry.get("src_gpu") == entry.get("dst_gpu")
        and any(getattr(mode_named(entry.get(f"{end}_mode")), "on_device", False) for end in ("src", "dst"))
    ):
        return "same GPU"
    return "intra-node"


def end_name(entry: Mapping[str, object], end: str) -> str:
    gpu = entry.get(f"{end}_gpu")
    host = entry.get(f"{end}_host") or "?"
    return f"{host}:gpu{gpu}" if gpu is not None else f"{host}:rank{entry[f'{end}_rank']}"


def mode_label(entry: Mapping[str, object], end: str) -> str:
    """An end's memory mode; a staged end with its pipeline shape, since chunk size and buffer
    count change the figure as much as the mode does."""
    mode = str(entry[f"{end}_mode"])
    staging = entry.get("staging")
    if mode != "staged" or not isinstance(staging, dict):
        return mode
    chunk, buffers = staging.get("chunk_bytes"), staging.get(f"{end}_buffers")
    if isinstance(chunk, int) and isinstance(buffers, int):
        return f"staged({format_size(chunk)} x{buffers})"
    return mode


@dataclass(frozen=True, slots=True)
class Records:
    """An entry's own records, each read back from its file once and checked there: its block list
    (BlockList, the entry's `blocks`) and its figure beside compute (BesideFigure, its `beside`)."""

    blocks: BlockList | None = None
    beside: BesideFigure | None = None


NO_RECORDS = Records()


def records_of(blocks: object, beside: object) -> Records:
    """An entry's `blocks` and `beside` as a file holds them, read once (the one place results/ does)."""
    if blocks is None and beside is None:
        return NO_RECORDS
    return Records(BlockList.from_json(blocks), BesideFigure.from_json(beside))


REMEASURED = "alone, re-measured after the screen"


def load_of(entry: Mapping[str, object], beside: BesideFigure | None = None) -> str:
    """The row's load as it prints: alone, re-measured alone, a concurrent round's pattern, or the model
    beside it (`beside`: the entry's figure), apart from its carve-out (a setting of its own, settings_of:
    carve-outs of one model are candidates of one answer)."""
    if entry.get("remeasured_from") is not None:
        return REMEASURED
    if beside is not None:  # a model's compute ran beside the link (--beside)
        return f"beside {beside.load.name}"
    links = entry.get("concurrent_links") or 1
    return "alone" if links == 1 else f"{entry.get('pattern', 'concurrent')}, {links} links"


def figure(entry: Mapping[str, object]) -> float | None:
    return finite_number(entry.get(figure_field(entry)[0]))


def finite_number(value: Any) -> float | None:
    """A finite number from a file, or None (readback.number: an integer past a float's range is none)."""
    found = number(value)
    return None if found is None else float(found)


# UCX settings that only steer logging or error reports: they do not change a figure.
_UCX_BOOKKEEPING = ("UCX_LOG_", "UCX_PROTO_INFO", "UCX_WARN_", "UCX_ERROR_", "UCX_HANDLE_ERRORS", "UCX_MEMTYPE_CACHE")


def settings_of(
    entry: Mapping[str, object], metadata: Mapping[str, object], records: Records = NO_RECORDS
) -> tuple[tuple[str, str], ...]:
    """The settings that must match before two runs of a link are merged: who timed the steps,
    whether payloads were checked, the window, and the UCX settings in force. (Load, memory modes
    and a staged pipeline's shape are in the row's key already.) Entries from before the native
    loop carry no engine: the Python loop timed them. `records`: the entry's own, read back once."""
    ucx = metadata.get("ucx_env") or {}
    if not isinstance(ucx, dict):
        ucx = {}
    tuned = ",".join(
        f"{key}={value}" for key, value in sorted(ucx.items()) if not str(key).startswith(_UCX_BOOKKEEPING)
    )
    settings: tuple[tuple[str, str], ...] = (
        ("engine", str(entry.get("engine") or "python")),
        ("validated", "yes" if entry.get("validated") else "no"),
        ("window", str(entry.get("window"))),
        ("ucx", tuned or "defaults"),
    )
    if entry.get("one_buffer"):  # a cache-resident figure: never merged with a buffer per message
        settings = (*settings, ("buffers", "one"))
    # Passes are not a setting: they adapt to the link and --sample-time from run to run.
    carveout = carveout_of(records.beside)
    if carveout:  # the model's SMs carved out: another setting, never merged
        settings = (*settings, (CARVEOUT, str(carveout)))
    record = records.blocks
    if record is not None:  # block lists (--blocks): never merged with plain messages or other shapes
        head, table = _list_words(record)
        return (*settings, ("blocks", head + _posting_words(record) + table))
    return settings


def _list_words(record: BlockList) -> tuple[str, str]:
    """A block list's words apart from who posted it: its shape (with a model's handoff) and its table."""
    shape = f"{record.count} x {record.layout}, {record.batch} in flight"
    handoff = record.handoff
    if isinstance(handoff, dict) and isinstance(handoff.get("model"), dict):  # --model: whose cache, how laid out
        shape += f", {handoff['model'].get('name')} {handoff.get('kv_layout')} {handoff.get('prompt_tokens')} tokens"
    table = record.table
    # --blocks-from: lists of their own, known by the file's digest
    return shape, f", table {str(table.get('sha256'))[:12]}" if isinstance(table, dict) else ""


def _posting_words(record: BlockList) -> str:
    """What a block list's settings say of how it was posted (the path's words, measure/postings.py: the
    GPU's kernel, the copy engines: paths apart; a request per block from the CPU adds nothing, as before
    other paths existed; its SMs, unmerged requests). The answer reads the path from posting_of, never
    from these words."""
    found = posting(record.posted_by if isinstance(record.posted_by, str) else None)
    words = found.said if found is not None else ""
    sms = record.sms
    if isinstance(sms, dict) and sms.get("mode") in ("budget", "green"):  # the posting kernel held to few SMs
        words += f", {sms.get('transfer')} SMs" + (" (green context)" if sms["mode"] == "green" else "")
    if record.merged is False:  # --no-merge: a request per block, where merging would post fewer
        words += ", unmerged"
    if isinstance(record.pace, str):  # an offload kernel's pace: each its own row
        words += f", pace {record.pace}"
    return words


def record_key(records: Records) -> str | None:
    """What a results record's own block list and load beside it add to its profile's settings and load
    (None: neither): records of one profile by other paths, SM budgets or carve-outs are other rows."""
    record, beside = records.blocks, records.beside
    if record is None and beside is None:
        return None
    words = "".join(_list_words(record)) + _posting_words(record) if record is not None else ""
    return words + (f" | {beside.load.label}" if beside is not None else "")


def posting_of(record: BlockList | None) -> tuple[str | None, int | None, bool]:
    """Who posted an entry's block list (its record): the posting path's name (measure/postings.py; None:
    not a block list; the CPU's where the entry names none, as before other paths existed: the record
    reads so; an offload kernel's with its pace, "kernel at 2x1x128"), the SMs the posting kernel was held
    to (None: no budget) and whether a green context held it there."""
    if record is None:
        return None, None, False
    path = f"{record.posted} at {record.pace}" if isinstance(record.pace, str) else record.posted  # a pace a candidate
    sms = record.sms
    if (
        not isinstance(sms, dict)
        or sms.get("mode") not in ("budget", "green")
        or not isinstance(sms.get("transfer"), int)
    ):
        return path, None, False
    return path, int(sms["transfer"]), sms["mode"] == "green"


def block_list_of(record: BlockList | None) -> str | None:
    """The block list an entry moved (its record), apart from who posted it: entries of one list by
    different paths (and carve-outs) are candidates for one answer. None for plain messages and for a
    list's one-message reference (a single contiguous block)."""
    if record is None or record.one_message:
        return None
    head, table = _list_words(record)
    return head + table


def carveout_of(beside: BesideFigure | None) -> int | None:
    """The SMs carved out of the model beside an entry (its figure; 0: none), or None where no model ran
    beside it."""
    return beside.load.carveout if beside is not None else None
