"""A run's configuration is a few records, each with its own check, built once from the parsed
options; the test kind is looked up once; and the settings a results file records (and the JSON the
ranks receive) keep today's keys, order and values, so results files and reports stay the same."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest

from rdmabench.errors import ConfigError
from rdmabench.job.config import BlockLists, Memory, Output, RunConfig, Steps, Verdict, What
from rdmabench.job.schedule import PATTERNS
from rdmabench.modes import MemoryMode

JOB = Path(__file__).resolve().parent.parent / "rdmabench" / "job"

OPTIONS = dict(
    test="put",
    src_mode=MemoryMode.PINNED,
    dst_mode=MemoryMode.PAGEABLE,
    sizes=[4096, 65536],
    blocks=4,
    layout="random",
    batch=2,
    pool=1 << 20,
    expect={"NIC": 0.8},
    nics=("eth0",),
    output="r.json",
)
# What the flat configuration of 2026-11-25 (commit 4b725ed) recorded for OPTIONS, byte for byte.
RECORDED = (
    '{"test": "put", "src_mode": "pinned", "dst_mode": "pageable", "sizes": [4096, 65536], "window": null, '
    '"passes": null, "one_buffer": false, "iterations": null, "warmup": null, "samples": 5, "sample_time": 0.05, '
    '"timeout": null, "validate": true, "output": "r.json", "output_format": "table", "units": "GB/s", '
    '"progress": "auto", "pattern": "pair", "link_class": "all", "concurrent": false, "root": 0, "nics": ["eth0"], '
    '"remeasure_below": 0.8, "max_pinned": null, "stage_chunk": 4194304, "stage_buffers": 2, "require_gdr": false, '
    '"engine": "auto", "blocks": 4, "layout": "random", "batch": 2, "pool": 1048576, "posting": "auto", '
    '"model": null, "kv_layout": "vllm", "prompt": null, "expect": {"NIC": 0.8}}'
)


def test_the_recorded_settings_keep_their_keys_order_and_values() -> None:
    config = RunConfig.from_options(OPTIONS, command_line="rdmabench run")
    assert json.dumps(config.summary()) == RECORDED


def test_the_ranks_rebuild_the_same_configuration_from_its_json() -> None:
    config = RunConfig.from_options(OPTIONS, command_line="rdmabench run")
    again = RunConfig.from_json(config.to_json())
    assert again == config and again.to_json() == config.to_json()
    flat = json.loads(RECORDED) | {"force": False, "command_line": "rdmabench run"}  # as a rank got it before
    assert RunConfig.from_json(json.dumps(flat)) == config


def test_no_record_holds_more_than_twelve_fields() -> None:
    records = [item.default_factory for item in fields(RunConfig) if item.name != "command_line"]  # type: ignore[misc]
    assert {record.__name__: len(fields(record)) for record in records if len(fields(record)) > 12} == {}
    assert len(fields(RunConfig)) <= 12


def test_the_test_kind_is_looked_up_once() -> None:
    """On the configuration (`kind`), never again by name in job/."""
    config = RunConfig.from_options({"test": "bibw"})
    assert config.kind is config.kind and config.kind.name == "bibw"
    lookups = [
        f"{path.name}:{node.lineno}"
        for path in JOB.glob("*.py")
        if path.name != "config.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("registry.get", "get")
    ]
    assert lookups == []


def test_the_pattern_is_looked_up_once() -> None:
    """On the configuration (`pattern`, a schedule.Pattern record), never again by name in job/."""
    config = RunConfig.from_options({"pattern": "screen"})
    assert config.pattern is config.pattern and config.pattern.remeasures
    lookups = [
        f"{path.name}:{node.lineno}"
        for path in JOB.glob("*.py")
        if path.name not in ("config.py", "schedule.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("pattern_named"))
        or (isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("PATTERNS"))
    ]
    assert lookups == []


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (lambda: RunConfig(what=What(pattern="star")).check(), "unknown pattern 'star'"),
        (lambda: What(pattern="ring", concurrent=True).check(PATTERNS["ring"]), "--concurrent schedules all-pairs"),
        (lambda: Memory(stage_buffers=3).check(), "no end here stages"),
        (lambda: Steps(samples=0).check(), "--samples must be between"),
        (lambda: Steps(one_buffer=True).check(), "add --no-validate"),
        (lambda: BlockLists(layout="strided").check([4096]), "give --blocks N as well"),
        (lambda: Output(units="MB/s").check(), "unknown units 'MB/s'"),
        (lambda: Verdict({"NIC": 1.5}).check(), "above 0 and at most 1"),
    ],
)
def test_each_record_checks_itself(record: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        record()  # type: ignore[operator]


def test_the_options_are_rewritten_in_one_place() -> None:
    """--mode sets both ends unless one is named; -b/-e/-f make a range; --blocks alone the block sweep."""
    config = RunConfig.from_options({"mode": MemoryMode.PINNED, "dst_mode": MemoryMode.PAGEABLE})
    assert config.modes == (MemoryMode.PINNED, MemoryMode.PAGEABLE)
    assert RunConfig.from_options({"min_size": 8, "max_size": 512, "step_factor": 8}).steps.sizes == [8, 64, 512]
    assert RunConfig.from_options({"test": "put", "blocks": 2}).steps.sizes == [4096, 16384, 65536, 262144, 1048576]
    with pytest.raises(ConfigError, match="give the sizes once"):
        RunConfig.from_options({"sizes": [8], "min_size": 8})


def test_from_json_refuses_what_is_no_object_in_one_line() -> None:
    """A configuration that is JSON but no object is refused as bad input, not a TypeError."""
    with pytest.raises(ConfigError, match="must be a JSON object"):
        RunConfig.from_json("[1, 2]")
