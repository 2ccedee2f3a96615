"""A row of the NIXL anchor (`rdmabench anchor --against nixl`) as a record: its keys and their types, in
the order each row is built (nixl._row), and the JSON document its rows are written in.

A row is one block list at one size, one rdmabench posting path beside one NIXL variant: NIXL's figures
(the mean of its runs before and after rdmabench's), rdmabench's, the ratios, beside compute each side's
alone and beside and the model's slowdown, and with --repeat the merge's (rounds.rounds_median). What a
list cost before its warm transfers is keyed by the names each side gives its costs (`nixl_cold_<name>_s`:
its agent's result file; `rdmabench_cold_<name>_s`: its block record), as many as they name: keys of the
row beyond the declared ones, as a TypedDict may hold (`with_cold`), read by prefix
(nixl_table._cold_line)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict, cast

from ..measure.kvhandoff import HandoffRecord
from .rounds import AnchorName


class _NixlKey(TypedDict):
    test: str
    nixl_operation: str  # WRITE or READ
    mode: str
    case: str  # the list: "8 runs:4", or a model's handoff
    size_bytes: int
    count: int
    layout: str
    regions: int
    transfer_bytes: int
    nixl_variant: str


class NixlFigures(TypedDict, total=False):
    """A row's figures (see the module's text): all of them, or one side's part as it is made."""

    handoff: HandoffRecord
    rdmabench_skipped: dict[str, str]  # posting paths rdmabench's run left out, and why
    nixl_threads: int
    # NIXL's figures, each the mean of its two runs
    nixl_gbps: float
    nixl_post_share: float
    nixl_descriptors_per_s: float
    nixl_transfers: float
    nixl_p50_us: float
    nixl_p99_us: float
    nixl_p999_us: float
    nixl_make_us: float
    nixl_cpu_s_per_gb: float
    nixl_vs_one: float
    nixl_before: float
    nixl_after: float
    nixl_drift: float
    # (nixl_cold_<name>_s: the initiator's costs by name, then the target's)
    nixl_cold_target_register_s: float
    nixl_cold_target_metadata_s: float
    nixl_own_post_us: float
    nixl_own_transfer_us: float
    nixl_descriptors_posted: float
    # rdmabench's, of its run without validation
    rdmabench_gbps: float
    rdmabench_post_share: float
    rdmabench_descriptors_per_s: float
    rdmabench_transfers: int
    rdmabench_p50_us: float
    rdmabench_p99_us: float
    rdmabench_p999_us: float
    rdmabench_step_gbps: float
    rdmabench_cpu_s_per_gb: float | None
    rdmabench_vs_one: float | None
    rdmabench_posted_by: str
    rdmabench_descriptors_posted: int
    ceiling_gbps: float
    # beside compute (nixl_beside.beside_figures)
    beside_load: str
    beside_unit: str
    nixl_alone_gbps: float
    nixl_beside_gbps: float
    rdmabench_alone_gbps: float | None
    rdmabench_beside_gbps: float
    nixl_slowdown: float | None
    nixl_slowdown_min: float | None
    nixl_slowdown_max: float | None
    rdmabench_slowdown: float | None
    ratio_beside_gbps: float
    rdmabench_slowdown_min: float | None
    rdmabench_slowdown_max: float | None
    rdmabench_unjudged: str
    nixl_unjudged: str
    nixl_load_alone: float | None
    rdmabench_load_alone: float | None
    # rdmabench's checked run, and the ratios taken in the round
    checked_gbps: float
    checked_p99_us: float
    ratio_gbps: float
    ratio_p99: float
    validation_share: float
    nixl_of_ceiling: float
    rdmabench_of_ceiling: float
    transport: str
    nixl_transport: str
    # --repeat: the merge's
    rounds: int
    runs: dict[str, list[float]]
    steady_rounds: int
    steady_ratio_gbps: float
    steady_ratio_p99: float
    incomplete: str


class NixlRow(_NixlKey, NixlFigures):
    """One row: its list, size and variant, and its figures."""


class NixlDocument(TypedDict):
    """What `anchor --against nixl -o` writes."""

    schema: AnchorName
    against: str
    rows: list[NixlRow]


def with_cold(row: NixlFigures, side: str, cold: Mapping[str, float]) -> NixlFigures:
    """`row` and what `side` ("nixl", "rdmabench") says its list cost before its warm transfers, a key a
    cost by its name (`<side>_cold_<name>_s`), after the row's keys so far."""
    keyed: dict[str, object] = {**row, **{f"{side}_cold_{name}_s": seconds for name, seconds in cold.items()}}
    return cast(NixlFigures, keyed)  # a TypedDict's value may hold keys beyond its own: these, by the sides' names
