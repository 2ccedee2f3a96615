"""What `rdmabench copy` writes: a copy's results entry, the document's metadata and what it holds
beside its entries (every GPU reading at once, a copy's overlap with a kernel), as TypedDicts: their
keys and types, in the order results files hold them."""

from __future__ import annotations

from typing import TypedDict

from ..hardware.gpu import GpuRecord
from ..results.files.contents import EntryHead, ResultsDocument


class Overlap(TypedDict):
    """How much of a copy hides behind a kernel on another stream (the document's "overlap" rows)."""

    gpu: int
    host_memory: str
    direction: str
    size_bytes: int
    copy_seconds: float
    kernel_seconds: float
    together_seconds: float
    overlap_efficiency: float


class AllGpusRead(TypedDict):
    """Every GPU reading pinned host memory at once (the document's "all_gpus_h2d")."""

    host_memory: str
    size_bytes: int
    aggregate_gbps: float
    per_gpu_gbps: list[float]


class CopyEntry(EntryHead):
    """One copy's results entry (a results file's entry, schema 1), in the order files hold its keys."""

    validated: bool
    wrong_bytes: int
    transport: str
    protocol: str
    gpu: int
    src_host: str
    dst_host: str
    src_gpu: int
    dst_gpu: int
    link: str
    reference_gbps: float | None
    ratio_to_reference: float | None
    host_prepare_seconds: float | None
    warnings: list[str]


class CopyConfig(TypedDict):
    """What `rdmabench copy` was asked (its metadata's "config")."""

    test: str
    sizes: list[int]
    directions: list[str]
    host_memory: list[str]
    samples: int


class CopyRank(TypedDict):
    rank: int
    host: str
    gpus: list[GpuRecord]


class CopyMetadata(TypedDict):
    """A copy document's metadata, in the order files hold its keys."""

    created_utc: str
    hosts: list[str]
    world_size: int
    ranks: list[CopyRank]
    units: dict[str, str]
    versions: dict[str, str | None]
    config: CopyConfig


class CopyExtras(TypedDict, total=False):
    """What a copy document holds beside its entries: every GPU reading at once, and the overlaps."""

    all_gpus_h2d: AllGpusRead
    overlap: list[Overlap]


class CopyDocument(ResultsDocument, CopyExtras):
    """`rdmabench copy`'s results document: its entries, and what it measured beside them."""
