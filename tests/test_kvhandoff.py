"""KV-cache handoffs as block lists (--model): descriptor counts and bytes of the shipped models in each
layout against numbers worked out by hand from their config.json, the pool's regions, the one-line
refusals, and one real run of a model's list (every block checked)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from rdmabench.errors import ConfigError
from rdmabench.measure.blocks import BlockShape
from rdmabench.measure.kvhandoff import HandoffRecord, ModelRecord, handoff, parse_model
from rdmabench.measure.kvmodels import MODELS
from rdmabench.results.files import document
from rdmabench.wire import native

from .conftest import QUICK, refused_in_one_line, run_cli

# (model, kv layout, prompt tokens) -> (descriptors, bytes each), by hand:
# Llama-3.1-8B: 32 layers, 8 KV heads of 128, bf16: a 16-token page is 16*8*128*2 = 32 KiB, a token 128 KiB.
# Llama-3.1-70B at tp=8: 80 layers, 1 KV head a rank: a page is 16*1*128*2 = 4 KiB.
# Qwen2.5-7B at tp=2: 28 layers, 2 KV heads a rank: a page is 16*2*128*2 = 8 KiB; 1000 tokens fill 63 blocks.
# DeepSeek-V3: MLA, 61 layers, one 576-value latent a token, 64-token blocks: a page is 64*576*2 = 72 KiB, a
# token 61*576*2 = 70,272 bytes; 4096 tokens are 64 blocks or 16 LMCache chunks of 256.
HAND_COMPUTED = [
    ("llama-3.1-8b", "vllm", 4096, 32 * 2 * 256, 32768),
    ("llama-3.1-8b", "layer-contiguous", 4096, 256, 32 * 2 * 32768),
    ("llama-3.1-8b", "lmcache", 4096, 16, 256 * 131072),
    ("llama-3.1-70b,tp=8", "vllm", 4096, 80 * 2 * 256, 4096),
    ("llama-3.1-70b,tp=16", "vllm", 4096, 80 * 2 * 256, 4096),  # more ranks than KV heads: each holds one
    ("llama-3.1-70b,tp=8,pp=2", "vllm", 4096, 40 * 2 * 256, 4096),
    ("llama-3.1-70b,tp=8,dtype_bytes=1", "layer-contiguous", 100, 7, 80 * 2 * 2048),
    ("qwen2.5-7b,tp=2", "vllm", 1000, 28 * 2 * 63, 8192),
    ("qwen2.5-7b", "lmcache", 257, 2, 256 * 28 * 2 * 4 * 128 * 2),
    ("deepseek-v3", "vllm", 4096, 61 * 64, 73728),
    ("deepseek-v3,tp=8", "vllm", 4096, 61 * 64, 73728),  # MLA's latent is whole on every rank
    ("deepseek-v3", "layer-contiguous", 4096, 64, 61 * 73728),
    ("deepseek-v3", "lmcache", 4096, 16, 256 * 70272),
]


@pytest.mark.parametrize("model, layout, prompt, count, block", HAND_COMPUTED)
def test_descriptor_counts_and_bytes_are_the_hand_computed_ones(
    model: str, layout: str, prompt: int, count: int, block: int
) -> None:
    found = handoff(model, layout, prompt)
    assert (found.count, found.block_bytes) == (count, block)
    assert found.transfer_bytes == count * block
    shape = found.shape("random")
    assert (shape.count, shape.regions) == (count, found.regions)


def test_a_prompt_moves_its_whole_cache_in_every_layout() -> None:
    """The same bytes however the cache is cut (whole blocks and chunks of 256 tokens: 4096 tokens fill both)."""
    sizes = {handoff("llama-3.1-8b", layout, 4096).transfer_bytes for layout in ("vllm", "layer-contiguous", "lmcache")}
    assert sizes == {4096 * 131072}
    assert handoff("deepseek-v3", "vllm", 4096).transfer_bytes == 4096 * 70272


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_models_record_holds_every_field_in_order(name: str) -> None:
    """ModelRecord names the fields ModelConfig.to_dict writes: all of them, in the file's order (the
    dataclass's), as asdict wrote them before the record was typed; and a handoff's record is its JSON."""
    model = parse_model(name)
    assert list(model.to_dict().items()) == list(dataclasses.asdict(model).items())
    assert list(model.to_dict()) == list(ModelRecord.__annotations__)
    record = handoff(name).record()
    assert list(record) == list(HandoffRecord.__annotations__)
    assert json.loads(json.dumps(record)) == record


def test_regions_share_their_block_ids_as_a_kv_cache_does() -> None:
    """vLLM's list: region by region (layer x K/V), every region's blocks at the same ids of its own region."""
    shape = handoff("llama-3.1-8b,layers=2", "vllm", 64).shape("random")  # 4 regions x 4 blocks
    assert (shape.count, shape.regions) == (16, 4)
    for end in ("src", "dst"):
        slots = shape.slots(end, 32768).reshape(4, 4)
        per_region = shape.region_slots(32768)
        assert per_region == 16  # four times the blocks moved, as a random layout's pool
        assert np.array_equal(slots - (np.arange(4) * per_region)[:, None], np.tile(slots[0], (4, 1)))
        assert slots.max() < shape.pool_slots(32768) == 64
    assert not np.array_equal(shape.slots("src", 32768), shape.slots("dst", 32768))
    # One region is the plain list: the shape of --blocks, slot for slot.
    assert np.array_equal(BlockShape(16, "random", regions=1).slots("src", 8), BlockShape(16, "random").slots("src", 8))
    with pytest.raises(ConfigError, match="do not split evenly into 3 regions"):
        BlockShape(16, "random", regions=3).check()


def test_a_config_json_of_either_kind(tmp_path: Path) -> None:
    llama = tmp_path / "config.json"
    llama.write_text(
        json.dumps({"num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096, "num_attention_heads": 32})
    )
    assert handoff(str(llama), "vllm", 4096).count == handoff("llama-3.1-8b", "vllm", 4096).count
    deepseek = tmp_path / "dsv3.json"
    deepseek.write_text(
        json.dumps({"num_hidden_layers": 61, "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64})
    )
    found = parse_model(f"{deepseek},dtype_bytes=1")
    assert (found.mla, found.head_dim, found.tokens_per_block, found.name) == (True, 576, 64, "dsv3,dtype_bytes=1")
    ours = tmp_path / "tiny.json"
    ours.write_text(json.dumps({"layers": 2, "kv_heads": 2, "head_dim": 64, "tokens_per_block": 8}))
    assert (handoff(str(ours), "vllm", 16).count, handoff(str(ours), "vllm", 16).block_bytes) == (8, 8 * 2 * 64 * 2)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "gpt-9"], "is neither a model rdmabench knows"),
        (["--model", "llama-3.1-8b", "--blocks", "4"], "leave out --blocks and --block-size"),
        (["--model", "llama-3.1-8b", "--sizes", "4KiB"], "leave out --sizes"),
        (["--model", "llama-3.1-8b,tp=3"], "tp=3 neither divides its 8 KV heads"),
        (["--model", "llama-3.1-8b,tp=two"], "tp takes a whole number"),
        (["--model", "llama-3.1-8b,heads=4"], "is not key=value of"),
        (["--model", "llama-3.1-8b,pp=99"], "pp=99 is more stages than its 32 layers"),
        (["--model", "llama-3.1-8b", "--kv-layout", "paged"], "unknown --kv-layout 'paged'"),
        (["--model", "llama-3.1-8b", "--prompt", "0"], "--prompt must be at least 1 token"),
        (["--kv-layout", "lmcache"], "give --model as well"),
        (["--prompt", "128"], "give --model as well"),
    ],
)
def test_bad_model_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    refused_in_one_line(tmp_path, ["--test", "put", *args], message)


def test_a_model_file_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "model.json"
    bad.write_text("{layers: 2")
    refused_in_one_line(tmp_path, ["--test", "put", "--model", str(bad)], "not JSON")
    bad.write_text(json.dumps({"layers": 2, "kv_heads": 2, "head_dim": 64, "attention": "sliding"}))
    refused_in_one_line(tmp_path, ["--test", "put", "--model", str(bad)], "unknown field(s) attention")


@pytest.mark.parametrize(
    "config, field",
    [
        ({"num_hidden_layers": 32, "hidden_size": "4096", "num_attention_heads": 32}, "hidden_size"),
        ({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": "32"}, "num_attention_heads"),
        ({"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": "64"}, "qk_rope_head_dim"),
        ({"num_hidden_layers": 61, "kv_lora_rank": "512", "qk_rope_head_dim": "64"}, "kv_lora_rank"),
        ({"num_hidden_layers": "32", "num_key_value_heads": 8, "head_dim": 128}, "num_hidden_layers"),
    ],
)
def test_a_config_json_whose_numbers_are_strings_is_one_line_naming_the_field(
    tmp_path: Path, config: dict[str, object], field: str
) -> None:
    """Strings where config.json has numbers were a TypeError (hidden_size // heads), or "512" + "64"."""
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=f"its {field} must be a whole number"):
        parse_model(str(bad))
    refused_in_one_line(tmp_path, ["--test", "put", "--model", str(bad)], f"its {field} must be a whole number")


@pytest.mark.skipif(native.load().library is None, reason=f"no native loop: {native.load().reason}")
def test_a_model_handoff_moves_checked_blocks_and_records_its_shape_and_costs(results_path: Path) -> None:
    """Real ranks move vLLM's list of a 2-layer model (4 regions: layer x K/V) into random slots, every
    block checked; the entry names the handoff, the pool's regions and what the list cost cold."""
    args = ["--test", "put", "--model", "llama-3.1-8b,layers=2", "--prompt", "64", "--layout", "random"]
    proc = run_cli(["run", "--np", "2", "-o", str(results_path), *QUICK, *args])
    assert proc.returncode == 0, proc.stderr
    assert "llama-3.1-8b,layers=2 (2 layers, 8 KV head(s) of 128 a rank), vllm layout" in proc.stdout
    reference, blocks = document.load(str(results_path))["results"]
    assert reference["size_bytes"] == 16 * 32768 and reference["blocks"]["count"] == 1
    assert blocks["size_bytes"] == 32768 and blocks["validated"] and blocks["wrong_bytes"] == 0
    record = blocks["blocks"]
    assert (record["count"], record["regions"], record["pool_bytes"]) == (16, 4, 64 * 32768)
    handoff_record = record["handoff"]
    assert (handoff_record["descriptors"], handoff_record["descriptor_bytes"], handoff_record["regions"]) == (
        16,
        32768,
        4,
    )
    assert handoff_record["model"]["layers"] == 2 and handoff_record["prompt_tokens"] == 64
    assert set(record["cold_s"]) == {"register", "keys", "prepare", "first_transfer"}
    assert all(seconds > 0 for seconds in record["cold_s"].values())
    assert 0 < record["post_share_p50"] <= 1 and record["descriptors_per_second_p50"] > 0
    assert blocks["cpu_s_per_gb"]["src"] > 0
