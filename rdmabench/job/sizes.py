"""Which sizes a run measures, from its command line's options: --sizes, nccl-tests' -b/-e/-f, the
block sizes of --blocks (--block-size, else the default block sweep), or the one block size a
model's handoff or a replayed block table sets; and what those set (`handoff_of`, `table_of`: the
blocks, their size and the transfers). Each refusal is one line naming the options."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..measure import blocktable, kvhandoff
from ..measure.kvhandoff import KV_LAYOUTS
from ..units import parse_sizes

DEFAULT_SIZES = "1:64MiB:x4"
DEFAULT_BLOCK_SIZES = "4KiB:1MiB:x4"  # --blocks without --block-size: KV-cache block sizes


def sizes_of(
    options: Mapping[str, Any], handoff: kvhandoff.Handoff | None, table: blocktable.BlockTable | None = None
) -> list[int]:
    """Message sizes (--sizes or nccl-tests' -b/-e/-f), or with --blocks the block sizes
    (--block-size, else the default block sweep), or a --model's or --blocks-from's one block size."""
    sizes, ranged = options.get("sizes"), size_range(options)
    if ranged is not None and sizes is not None:
        raise ConfigError("give the sizes once: --sizes, or -b/-e/-f")
    fixed = handoff.block_bytes if handoff is not None else table.block_size if table is not None else None
    if fixed is not None:
        if ranged is not None or sizes is not None:
            option = "--model" if handoff is not None else "--blocks-from"
            raise ConfigError(f"{option} sets the block size: leave out --sizes and -b/-e/-f")
        return [fixed]
    block_sizes = options.get("block_size")
    if block_sizes is not None:
        if options.get("blocks") is None:
            raise ConfigError("--block-size sizes the blocks of --blocks N: give --blocks as well")
        return list(block_sizes)
    if ranged is not None:
        return ranged
    if sizes is not None:
        return list(sizes)
    return parse_sizes(DEFAULT_BLOCK_SIZES if options.get("blocks") is not None else DEFAULT_SIZES)


def size_range(options: Mapping[str, Any]) -> list[int] | None:
    """nccl-tests' -b/-e/-f (sizes in bytes) as a range of sizes, or None when none was given."""
    low, high, factor = options.get("min_size"), options.get("max_size"), options.get("step_factor")
    if low is None and high is None and factor is None:
        return None
    if factor is not None and factor < 2:
        raise ConfigError(f"-f/--step-factor must be at least 2, not {factor}")
    low, high = low or high, high or low
    if low is None:
        raise ConfigError("-f/--step-factor needs -b/--min-size or -e/--max-size")
    return parse_sizes(f"{low}:{high}:x{factor or 2}")


def handoff_of(options: Mapping[str, Any]) -> kvhandoff.Handoff | None:
    """--model: its handoff's descriptors become --blocks and the block size (given neither)."""
    sets = {"--blocks": options.get("blocks"), "--block-size": options.get("block_size")}
    return model_handoff(options.get("model"), options.get("kv_layout", KV_LAYOUTS[0]), options.get("prompt"), sets)


def model_handoff(
    model: str | None, kv_layout: str, prompt: int | None, sets: Mapping[str, Any]
) -> kvhandoff.Handoff | None:
    """A model's KV-cache handoff (--model, shaped by --kv-layout and --prompt; None without --model),
    checked as every command that takes it checks it (run, anchor --against nixl). `sets`: the options
    --model sets, by spelling, as the command was given them (None: not given)."""
    if model is None:
        refuse_handoff_options(kv_layout, prompt)
        return None
    if any(value is not None for value in sets.values()):
        raise ConfigError(f"--model sets the blocks and their size: leave out {' and '.join(sets)}")
    return kvhandoff.handoff(model, kv_layout, prompt)


def refuse_handoff_options(kv_layout: str, prompt: int | None) -> None:
    if (kv_layout, prompt) != (KV_LAYOUTS[0], None):
        raise ConfigError("--kv-layout and --prompt shape a model's handoff: give --model as well")


def table_of(options: Mapping[str, Any]) -> blocktable.BlockTable | None:
    """--blocks-from: its table's blocks, transfers and block size become --blocks, --batch and the
    block size (given none of them)."""
    path = options.get("blocks_from")
    if path is None or options.get("blocks_from_sha256") is not None:  # none, or a rank's copy of the config
        return None
    if options.get("model") is not None:
        raise ConfigError("--blocks-from and --model each set the blocks: give one of them")
    given = [name for name, key, default in _TABLE_SETS if options.get(key, default) != default]
    if given:
        raise ConfigError(f"--blocks-from sets the blocks and their size: leave out {', '.join(given)}")
    return blocktable.load(path)


# What a table sets, so may not be given beside it: (option, parameter, its default).
_TABLE_SETS = (
    ("--blocks", "blocks", None),
    ("--block-size", "block_size", None),
    ("--layout", "layout", "contiguous"),
    ("--batch", "batch", 1),
)
