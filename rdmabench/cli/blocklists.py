"""Block-list options, declared once: `run`'s group (each option's parameter is the name of its field
in the configuration's block-list record, job/config.py, so a new option is a line here and a field
there), and the same options as `anchor --against nixl` takes them, where --blocks and --layout may
name several (each a list of its own: `several=True`), with the same metavar and help."""

from __future__ import annotations

from typing import Any

import click

from ..measure import kvmodels
from ..measure.blocks import LAYOUTS, layout_help
from ..measure.kvhandoff import KV_LAYOUTS
from ..measure.postings import posting_help
from .group import count, names
from .options import SIZE, SIZES, Decorator, choices, group, parsed

SEVERAL = " Several, comma-separated: a list each."


def _counts(text: str) -> tuple[int, ...]:
    return tuple(count(part, "--blocks") for part in names(text, "--blocks"))


def _layouts(text: str) -> tuple[str, ...]:
    return tuple(names(text, "--layout"))


def blocks_option(several: bool = False, default: str = "") -> Decorator:
    """--blocks N: blocks per transfer (`several`: N[,N...] as a tuple, under `counts`)."""
    return click.option(
        "--blocks",
        "counts" if several else "blocks",
        type=parsed("counts", _counts) if several else int,
        default=None,
        metavar="N[,N...]" if several else "N",
        help="Block lists shaped like KV caches: each transfer moves N blocks between slots of two pools, as puts, "
        "gets or tagged messages (--test put, get or bw), timed per transfer (p50, p99, p99.9) and against one "
        "contiguous message of the same bytes." + (SEVERAL if several else "") + default,
    )


def layout_option(several: bool = False, default: str = "") -> Decorator:
    """--layout: where blocks sit in each pool (`several`: a tuple of layouts, under `layouts`)."""
    return click.option(
        "--layout",
        "layouts" if several else "layout",
        type=parsed("layouts", _layouts) if several else None,
        default=None if several else "contiguous",
        metavar=choices(LAYOUTS) + ("[,...]" if several else ""),
        help=f"With --blocks: where blocks sit in each pool. {layout_help()}." + (SEVERAL if several else "") + default,
    )


posting_option = click.option(
    "--posting",
    default="auto",
    metavar="PATH[,PATH...]|all",
    help="With --blocks, put or get of device memory, or swap-out and swap-in (to the rank's own pinned pool): who "
    "posts the list; a list (or all: every path that applies) measures each path in turn. " + posting_help() + ". "
    "Results name the path "
    "that ran, and why where auto fell back or a path of a list could not run.",
)


def files_read(given: dict[str, Any]) -> list[str]:
    """The files the block-list options of a command read (--blocks-from, a --model given as a JSON
    file before its overrides): no output of the command may replace them (cli.group.writes)."""
    model = given.get("model")
    found = [given.get("blocks_from"), model.split(",", 1)[0] if isinstance(model, str) else None]
    return [path for path in found if path]


# A model's KV-cache handoff as the block list (run, anchor --against nixl); checked once, by
# job.sizes.model_handoff.
model_options = group(
    click.option(
        "--model",
        default=None,
        metavar="CONFIG",
        help="A KV-cache handoff as block lists: the descriptors one prefill rank posts to its decode peer for one "
        f"prompt, from a model's KV shape: a known model ({', '.join(kvmodels.MODELS)}) or a JSON file (a "
        "config.json too), then ,key=value overrides (tp, pp, dtype_bytes, tokens_per_block, layers, kv_heads, "
        "head_dim, mla, chunk_tokens). Sets --blocks and the block size; --layout places the blocks.",
    ),
    click.option(
        "--kv-layout",
        default=KV_LAYOUTS[0],
        metavar=choices(KV_LAYOUTS),
        help="With --model: a descriptor per layer x block x K/V (vLLM's NIXL connector), per block across layers, "
        "or per LMCache chunk of 256 tokens across layers.",
    ),
    click.option(
        "--prompt",
        type=int,
        default=None,
        metavar="TOKENS",
        help="With --model: the prompt's length in tokens, filling whole blocks. [default: 4096]",
    ),
)

block_options = group(
    blocks_option(),
    click.option(
        "--block-size",
        default=None,
        type=SIZES,
        metavar="SIZES",
        help="With --blocks: the block sizes to sweep, as --sizes (4KiB:1MiB). [default: 4KiB:1MiB:x4]",
    ),
    layout_option(),
    click.option("--batch", type=int, default=1, help="With --blocks: transfers in flight per step."),
    click.option(
        "--blocks-from",
        default=None,
        metavar="FILE",
        help="Block lists replayed from an engine's block table: a JSON file of the block size and, per transfer, "
        "the local and remote slots or [offset, length] pairs (docs/usage.md). Sets --blocks, --batch and the "
        "block size.",
    ),
    click.option(
        "--merge/--no-merge",
        default=True,
        help="With --blocks, posted by the CPU: blocks adjacent at both ends go as one request, as NIXL merges them "
        "(--no-merge: a request per block, the unmerged cost). [default: merge]",
    ),
    posting_option,
    click.option(
        "--posting-sms",
        default=None,
        metavar="N|green:N|all",
        help="With --posting gpu, auto or all: the SMs the GPU's posting kernel may occupy, to spare a model's "
        "compute: N = a grid of at most N CUDA blocks (a fixed budget); green:N = a green-context partition of N "
        "SMs (rounded up as the GPU splits them), --beside's load on the rest. [default: all]",
    ),
    click.option(
        "--pool",
        default=None,
        type=SIZE,
        metavar="SIZE",
        help="With --blocks: each end's pool in bytes. [default: what the layout needs; 4x that for random]",
    ),
    model_options,
)
