"""What a results entry gives its row: its link's name and class, its ends' memory-mode labels, its load,
its figure, and the settings that must match before two runs of a link are merged."""

from __future__ import annotations

import math
from typing import Any

from ...measure.blockrecord import BlockList
from ...measure.postings import posting
from ...modes import mode_named
from ...units import format_size
from .contents import figure_field

LINK_CLASSES = ("same GPU", "intra-node", "inter-node")


def link_class(entry: dict[str, Any]) -> str:
    if entry.get("src_host") != entry.get("dst_host"):
        return "inter-node"
    if (
        entry.get("src_gpu") is not None
        and entry.get("src_gpu") == entry.get("dst_gpu")
        and any(getattr(mode_named(entry.get(f"{end}_mode")), "on_device", False) for end in ("src", "dst"))
    ):
        return "same GPU"
    return "intra-node"


def end_name(entry: dict[str, Any], end: str) -> str:
    gpu = entry.get(f"{end}_gpu")
    host = entry.get(f"{end}_host") or "?"
    return f"{host}:gpu{gpu}" if gpu is not None else f"{host}:rank{entry[f'{end}_rank']}"


def link_name(entry: dict[str, Any]) -> str:
    return f"{end_name(entry, 'src')} -> {end_name(entry, 'dst')}"


def mode_label(entry: dict[str, Any], end: str) -> str:
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


def load_of(entry: dict[str, Any]) -> str:
    if entry.get("remeasured_from") is not None:
        return "alone, re-measured after the screen"
    beside = entry.get("beside")
    if isinstance(beside, dict) and beside.get("load"):  # a model's compute ran beside the link (--beside)
        return f"beside {beside['load']}"
    links = entry.get("concurrent_links") or 1
    return "alone" if links == 1 else f"{entry.get('pattern', 'concurrent')}, {links} links"


def figure(entry: dict[str, Any]) -> float | None:
    value = entry.get(figure_field(entry)[0])
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def finite_number(value: Any) -> float | None:
    """A finite number from a file, or None."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


# UCX settings that only steer logging or error reports: they do not change a figure.
_UCX_BOOKKEEPING = ("UCX_LOG_", "UCX_PROTO_INFO", "UCX_WARN_", "UCX_ERROR_", "UCX_HANDLE_ERRORS", "UCX_MEMTYPE_CACHE")


def posting_of(entry: dict[str, Any]) -> tuple[str | None, int | None, bool]:
    """Who posted a block-list entry's list (measure/postings.py; None: no block list), the SMs its
    posting kernel was held to (None: the whole GPU, or no kernel), and whether in a green context."""
    return posting_of_record(entry.get("blocks"))


def posting_of_record(blocks: Any) -> tuple[str | None, int | None, bool]:
    """posting_of, from the entry's block-list record as a file holds it."""
    record = BlockList.from_json(blocks)
    if record is None:
        return None, None, False
    sms = record.sms if isinstance(record.sms, dict) else {}
    held = sms.get("transfer") if sms.get("mode") in ("budget", "green") else None
    return record.posted, held if isinstance(held, int) else None, sms.get("mode") == "green"


def _list_label(record: BlockList) -> str:
    """A block list's settings: its shape, who posted it (the GPU's kernel, the copy engines: paths
    apart; a request per block from the CPU adds nothing, as before other paths existed), its SM budget,
    whether merged, and the table it replays."""
    shape = f"{record.count} x {record.layout}, {record.batch} in flight"
    handoff = record.handoff
    if isinstance(handoff, dict) and isinstance(handoff.get("model"), dict):  # --model: whose cache, how laid out
        shape += f", {handoff['model'].get('name')} {handoff.get('kv_layout')} {handoff.get('prompt_tokens')} tokens"
    found = posting(record.posted_by if isinstance(record.posted_by, str) else None)
    shape += found.said if found is not None else ""
    sms = record.sms
    if isinstance(sms, dict) and sms.get("mode") in ("budget", "green"):  # the posting kernel held to few SMs
        shape += f", {sms.get('transfer')} SMs" + (" (green context)" if sms["mode"] == "green" else "")
    if record.merged is False:  # --no-merge: a request per block, where merging would post fewer
        shape += ", unmerged"
    if isinstance(record.table, dict):  # --blocks-from: lists of their own, known by the file's digest
        shape += f", table {str(record.table.get('sha256'))[:12]}"
    return shape


def settings_of(entry: dict[str, Any], metadata: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The settings that must match before two runs of a link are merged: who timed the steps,
    whether payloads were checked, the window, and the UCX settings in force. (Load, memory modes
    and a staged pipeline's shape are in the row's key already.) Entries from before the native
    loop carry no engine: the Python loop timed them."""
    ucx: dict[str, Any] = metadata.get("ucx_env") or {}
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
    record = BlockList.from_json(entry.get("blocks"))
    if record is not None:  # block lists (--blocks): never merged with plain messages or other shapes
        return (*settings, ("blocks", _list_label(record)))
    return settings
