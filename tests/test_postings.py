"""Posting paths as records (measure/postings.py) and a block list's record in one file
(measure/blockrecord.py): a new path is its record, the reports read the record, never a label."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rdmabench.errors import ConfigError
from rdmabench.hardware.gpu import visible_gpu_count
from rdmabench.measure import postings
from rdmabench.measure.blockrecord import BlockList
from rdmabench.measure.postings import POSTINGS, Posting, parse_postings
from rdmabench.results.files import document
from rdmabench.results.files.entries import posting_of, records_of, settings_of
from rdmabench.results.files.row import Row
from rdmabench.wire.armed import ARM_BOUND, ARMED_PATH

from .conftest import QUICK, run_cli

_RECORD = {
    "count": 8, "block_bytes": 4096, "transfer_bytes": 32768, "layout": "random", "batch": 1, "regions": 1,
    "pool_bytes": 131072, "operation": "blocks-put", "transfers": 40,
    "transfer_us": {"p50": 10.0, "p99": 12.0, "p99.9": 13.0, "max": 14.0}, "transfer_gbps_p50": 3.2,
    "descriptors_per_second_p50": 8e5, "post_us_p50": 2.0, "post_share_p50": 0.2, "completion_us_p50": 8.0,
    "cold_s": {"prepare": 0.001}, "posted_by": "gpu", "path": "gpu-initiated", "sms": {"mode": "green", "transfer": 16, "load": 116},
    "ceiling_gbps": 300.0, "ceiling_runs_gbps": [299.0, 301.0], "share_of_ceiling": 0.01,
}  # fmt: skip


def test_the_record_reads_back_what_it_writes_in_its_order() -> None:
    record = BlockList.from_json(_RECORD)
    assert record is not None and record.to_json() == _RECORD
    assert list(record.to_json()) == list(_RECORD)  # the file's order
    assert BlockList.from_json(dict(_RECORD, unknown=1)) == record  # a newer file's key is left out
    assert BlockList.from_json([1, 2]) is None and BlockList.from_json(None) is None


def test_posting_of_reads_the_record_not_the_label() -> None:
    assert posting_of(BlockList.from_json(_RECORD)) == ("gpu", 16, True)
    assert posting_of(BlockList.from_json(dict(_RECORD, sms={"mode": "whole GPU"}))) == ("gpu", None, False)
    older = BlockList.from_json({k: v for k, v in _RECORD.items() if k not in ("posted_by", "path")})
    assert posting_of(older)[0] == "cpu"  # a record that names no poster: the CPU's, as before other paths
    assert posting_of(None) == (None, None, False)
    row = Row("put", "device", "device", 4096, "h:gpu0 -> h:gpu1", "intra-node", "h", "h", "GB/s")
    row.settings = (("blocks", "8 x random, 1 in flight, posted by the GPU, 16 SMs (green context)"),)
    copies = BlockList.from_json(dict(_RECORD, posted_by="ce-batch", sms={"mode": "copy engines"}))
    assert copies is not None
    row.add_list(copies, [1.0], first=True)
    assert (row.posting, row.posting_sms, row.block_list) == ("ce-batch", None, "8 x random, 1 in flight")
    kernel = BlockList.from_json(dict(_RECORD, cpu_us_per_descriptor=0.5, contiguous_gbps=9.0))
    assert kernel is not None
    row.add_list(kernel, [1.0], first=True)
    assert (row.posting, row.posting_sms, row.posting_green) == ("gpu", 16, True)
    assert (row.cpu_us_per_descriptor, row.contiguous_gbps) == (0.5, 9.0)


def test_a_new_path_is_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A path registered beside the others: `all` runs it, the option's help and the tables' words name it,
    a results entry's settings keep it apart, and posting_of names it, with no other change."""
    armed = Posting(
        "ce-test", "copy engines armed ahead", "copy engines", ("device memory at both ends",), device=True,
        said=", armed on the copy engines", words="copies armed ahead of the data",
        steps=POSTINGS["ce-batch"].steps, problem=lambda: "no stream memory operations here",
    )  # fmt: skip
    monkeypatch.setitem(POSTINGS, armed.name, armed)
    assert parse_postings("all")[-1] == armed and _names(parse_postings("cpu,ce-test")) == ["cpu", "ce-test"]
    assert "ce-test: copy engines armed ahead" in postings.posting_help()
    assert "ce-test: copies armed ahead of the data" in postings.by_words()
    found = postings.problems((POSTINGS["cpu"], armed))  # the one check
    assert found == {"ce-test": "no stream memory operations here"}
    entry = {"test": "put", "blocks": dict(_RECORD, posted_by="ce-test", sms={"mode": "copy engines"})}
    records = records_of(entry["blocks"], None)
    assert dict(settings_of(entry, {}, records))["blocks"] == "8 x random, 1 in flight, armed on the copy engines"
    assert posting_of(records.blocks) == ("ce-test", None, False)


def _names(records: tuple[Posting, ...]) -> list[str]:
    return [record.name for record in records]


def test_parse_postings_keeps_its_words() -> None:
    assert _names(parse_postings("all")) == ["gpu", "ce-batch", "ce-armed", "cpu"]
    assert parse_postings("auto") == (POSTINGS["auto"],)
    with pytest.raises(ConfigError, match="leaves a name empty"):  # a list of nothing is never auto
        parse_postings("")
    with pytest.raises(ConfigError, match=r"unknown --posting 'nope': choose auto, gpu, ce-batch, ce-armed, cpu, all"):
        parse_postings("gpu,nope")
    with pytest.raises(ConfigError, match="auto chooses a path itself"):
        parse_postings("auto,gpu")
    assert POSTINGS["auto"].posts == "gpu" and POSTINGS["cpu"].steps is None
    assert [name for name, record in POSTINGS.items() if record.device] == ["gpu", "ce-batch", "ce-armed"]
    # an armed copy of one block is ce-batch's copy
    assert _names(postings.REFERENCE_PATHS) == ["gpu", "ce-batch"]
    assert [name for name, record in POSTINGS.items() if record.takes_sms] == ["auto", "gpu", "kernel"]
    assert [name for name, record in POSTINGS.items() if record.carvable] == ["auto", "gpu", "kernel"]


def test_related_reads_the_fastest_reference_and_leaves_a_contiguous_message_alone() -> None:
    record = BlockList.from_json(_RECORD)
    assert record is not None
    found = record.related(3.0, None, [(30.0, "gpu"), (40.0, "ce-batch")])
    assert (found.contiguous_gbps, found.contiguous_posted_by, found.share_of_contiguous) == (40.0, "ce-batch", 0.075)
    one = replace(record, count=1, layout="contiguous", share_of_ceiling=None)
    assert one.related(3.0, None, [(40.0, "gpu")]).contiguous_gbps is None
    assert one.related(3.0, None, [(40.0, "gpu")]).share_of_ceiling == 0.01


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 2, reason="ce-armed between two ranks: a GPU each")
@pytest.mark.parametrize("test", ["put", "get"])
def test_ce_armed_moves_and_validates_every_block_and_records_its_arming(test: str, tmp_path: Path) -> None:
    """The registry's ce-armed through the block-list protocol: every block checked, the entry says who
    posted it and what arming cost (outside the clock), and its reference is the GPU's contiguous one."""
    out = tmp_path / "r.json"
    args = ["run", "--np", "2", "--test", test, "--mode", "device", "--blocks", "64", "--block-size", "4KiB"]
    proc = run_cli([*args, "--layout", "random", "--posting", "ce-armed", "-o", str(out), *QUICK])
    assert proc.returncode == 0, proc.stderr
    lists = [entry for entry in document.load(str(out))["results"] if entry["blocks"]["count"] == 64]
    assert lists and all(entry["validated"] and entry["wrong_bytes"] == 0 for entry in lists)
    record = BlockList.from_json(lists[0]["blocks"])
    assert record is not None and record.posted_by == "ce-armed" and record.path == ARMED_PATH
    assert record.arm_us is not None and record.arm_us > 0 and record.cpu_us_per_descriptor is not None
    assert (record.armed_lists, record.arm_bound) == (1, ARM_BOUND)
    assert record.contiguous_posted_by in _names(postings.REFERENCE_PATHS)


def test_ce_armed_is_skipped_with_its_reason_where_a_rank_sees_one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one GPU the first arm blocked the arming thread for good on an H100: a rank that sees one GPU
    (or none) leaves the path out, saying why, before anything is armed."""
    monkeypatch.setattr(postings, "visible_gpu_count", lambda: 1)
    why = POSTINGS["ce-armed"].problem()
    assert why is not None and "another GPU" in why and "\n" not in why


@pytest.mark.parametrize("corrupt", [False, True])
def test_a_step_is_filled_before_its_copies_are_armed(corrupt: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first fill loads its kernel, and loading a kernel may wait for the whole GPU, armed copies
    included, which wait for the step's release: a put of ce-armed hung on two H200s. So the payload
    (and a planted wrong byte) is written and synchronised before the path arms its copies."""
    from types import SimpleNamespace

    import numpy as np

    from rdmabench.measure import blocksteps
    from rdmabench.measure.blocks import BlockShape
    from rdmabench.wire.native import RMA_PUT

    log: list[str] = []

    class Matrix:
        def __getitem__(self, _slot: int) -> Any:
            log.append("corrupt")
            return np.zeros(64, dtype=np.uint64)

    payload = SimpleNamespace(xp=np, slots=[0], matrix=Matrix(), fill=lambda _keys: log.append("fill"))
    steps = SimpleNamespace(arm=lambda _device: log.append("arm") or 1e-3)
    lists = SimpleNamespace(payload=payload, steps=steps, device=object(), armed=[])
    side = SimpleNamespace(link=SimpleNamespace(dst=1), mode=None)
    end = SimpleNamespace(
        targets=[side], corrupt_at=0 if corrupt else None, spec=SimpleNamespace(plan=SimpleNamespace(warmup=0), size=64)
    )
    monkeypatch.setattr(blocksteps, "_lists", lambda _end: lists)
    monkeypatch.setattr(blocksteps, "synchronize", lambda _mode: log.append("sync"))
    protocol = blocksteps.BlocksProtocol(RMA_PUT, BlockShape(4, "random", posting=POSTINGS["ce-armed"]), device=True)
    protocol.fill(end, 0)  # type: ignore[arg-type]
    assert log == ["fill", *(["corrupt"] if corrupt else []), "sync", "arm"] and lists.armed == [1e-3]


def test_each_gpu_side_path_is_named_in_at_most_three_code_files() -> None:
    """A posting path is its record (postings.py), and the code that posts it: its name appears in at
    most 3 code files of the package (issue 43: ce-batch was in 9), so that a path's words live once."""
    package = Path(__file__).resolve().parent.parent / "rdmabench"
    sources = [p for p in package.rglob("*") if p.suffix in {".py", ".c", ".h", ".cu", ".cuh"}]
    for path in ("ce-batch", "ce-armed"):
        naming = sorted(str(p.relative_to(package)) for p in sources if path in p.read_text(errors="replace"))
        assert len(naming) <= 3, (path, naming)


def test_a_new_kernel_posted_path_takes_posting_sms_and_every_carve_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A path whose kernel runs on the GPU's SMs is its record: registered with takes_sms and carvable,
    --posting-sms holds it and --beside's carve-outs are each run beside it, no other file changed (the
    names gpu and auto were the rule before)."""
    from rdmabench.job.config import RunConfig
    from rdmabench.modes import MemoryMode

    kernel = Posting(
        "gpu-test", "a posting kernel of its own", "gpu", ("device memory at both ends",), device=True,
        steps=POSTINGS["gpu"].steps, takes_sms=True, carvable=True,
    )  # fmt: skip
    monkeypatch.setitem(POSTINGS, kernel.name, kernel)
    options = {"test": "put", "mode": MemoryMode.DEVICE, "blocks": 8, "posting": "gpu-test", "posting_sms": "8"}
    config = RunConfig.from_options(options | {"beside": "gemm,carveout=all"})
    assert config.postings == (kernel,) and config.shape.lists[0].posting == kernel
    budget = config.shape.lists[0].budget
    assert budget is not None and budget.sms == 8
    (step,) = config.kind.protocols(config.shape, config.postings)
    assert config.beside is not None
    assert [load.carveout for load in config.beside.for_transfer(step.carvable())] == [0, 4, 8, 16]
    with pytest.raises(ConfigError, match="holds the GPU's posting kernel: give --posting gpu, gpu-test, auto or all"):
        RunConfig.from_options(options | {"posting": "ce-batch"})
    engines = RunConfig.from_options(
        options | {"posting": "ce-batch", "posting_sms": None, "beside": "gemm,carveout=all"}
    )
    (copies,) = engines.kind.protocols(engines.shape, engines.postings)
    assert engines.beside is not None and [
        load.carveout for load in engines.beside.for_transfer(copies.carvable())
    ] == [0]
