"""A prefill-to-decode KV-cache handoff as a block list (--model): from a model's KV shape, an engine's
cache layout and a prompt length, the descriptors one rank of the prefill would post to its peer
rank of the decode (the same TP and PP at both ends).

Per rank, a block of `tokens_per_block` tokens of one layer holds, for K and for V (MLA: one latent),
a page of tokens_per_block x kv_heads_per_rank x head_dim x dtype_bytes bytes. Layouts:

- vllm: one descriptor per layer x block x K/V (MLA: layer x block), as vLLM's NIXL connector posts
  them (its FlashAttention cache: a K and a V tensor per layer, each a region of the pool; block ids
  are shared by every region): layers x 2 x blocks descriptors of one page;
- layer-contiguous: one descriptor per block holding every layer's K and V (a cache allocated block
  by block across layers): blocks descriptors of layers x 2 pages;
- lmcache: one descriptor per chunk of `chunk_tokens` tokens (LMCache's default chunk: 256 tokens)
  holding every layer's K and V: ceil(prompt / chunk_tokens) descriptors.

A prompt fills whole blocks (and chunks): its last one is moved whole, as an engine moves it. The
pool's layout of blocks (contiguous, strided, random slots) stays --layout's: blocks.py.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypedDict

from .. import userfiles
from ..errors import ConfigError
from ..units import is_digits
from .blocks import BlockShape, SmBudget
from .kvmodels import MODELS
from .postings import AUTO, Posting

KV_LAYOUTS = ("vllm", "layer-contiguous", "lmcache")
DEFAULT_PROMPT = 4096  # tokens
LMCACHE_CHUNK = 256  # tokens: LMCache's default chunk_size
_MODEL_FILE_LIMIT = 1 << 20  # a config.json is a few KiB


class ModelRecord(TypedDict):
    """A ModelConfig as a results entry's handoff and a run's options keep it (its fields, in order)."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    tokens_per_block: int
    tp: int
    pp: int
    mla: bool
    chunk_tokens: int


class HandoffRecord(TypedDict):
    """What a results entry keeps of a handoff (the block list's "handoff", docs/results-format.md)."""

    model: ModelRecord
    kv_layout: str
    prompt_tokens: int
    engine_blocks: int
    regions: int
    descriptors: int
    descriptor_bytes: int
    transfer_bytes: int


@dataclass(frozen=True)
class ModelConfig:
    """A model's KV cache as an engine serves it: what one rank holds and in what blocks."""

    name: str
    layers: int
    kv_heads: int  # MLA: 1 (one latent a token, shared by every head)
    head_dim: int  # MLA: kv_lora_rank + qk_rope_head_dim
    dtype_bytes: int = 2  # bf16; 1 for an fp8 KV cache
    tokens_per_block: int = 16  # vLLM's default block size
    tp: int = 1
    pp: int = 1
    mla: bool = False
    chunk_tokens: int = LMCACHE_CHUNK

    def check(self) -> ModelConfig:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.type == "int" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(
                    f"--model {self.name}: {item.name} must be a whole number of at least 1, not {value!r}"
                )
        if not isinstance(self.mla, bool):
            raise ConfigError(f"--model {self.name}: mla is true or false, not {self.mla!r}")
        if self.pp > self.layers:
            raise ConfigError(f"--model {self.name}: pp={self.pp} is more stages than its {self.layers} layers")
        if not self.mla and self.kv_heads % self.tp and self.tp % self.kv_heads:
            raise ConfigError(
                f"--model {self.name}: tp={self.tp} neither divides its {self.kv_heads} KV heads nor is a multiple of them"
            )
        return self

    @property
    def layers_per_rank(self) -> int:
        """The layers of the largest pipeline stage."""
        return math.ceil(self.layers / self.pp)

    @property
    def kv_heads_per_rank(self) -> int:
        """KV heads a TP rank holds: split among ranks, or replicated where ranks outnumber them (and
        MLA's latent, which every rank holds whole)."""
        if self.mla:
            return self.kv_heads
        return max(1, self.kv_heads // self.tp)

    @property
    def kv_parts(self) -> int:
        """K and V, or MLA's one latent."""
        return 1 if self.mla else 2

    @property
    def page_bytes(self) -> int:
        """One layer's K (or V, or latent) for one block, on one rank."""
        return self.tokens_per_block * self.kv_heads_per_rank * self.head_dim * self.dtype_bytes

    @property
    def token_bytes(self) -> int:
        """One token's KV cache on one rank, every layer of its stage."""
        return self.layers_per_rank * self.kv_parts * self.kv_heads_per_rank * self.head_dim * self.dtype_bytes

    def to_dict(self) -> ModelRecord:
        return {
            "name": self.name, "layers": self.layers, "kv_heads": self.kv_heads, "head_dim": self.head_dim,
            "dtype_bytes": self.dtype_bytes, "tokens_per_block": self.tokens_per_block, "tp": self.tp, "pp": self.pp,
            "mla": self.mla, "chunk_tokens": self.chunk_tokens,
        }  # fmt: skip


@dataclass(frozen=True)
class Handoff:
    """The descriptor list of one prompt's KV cache, from one prefill rank to its decode peer."""

    model: ModelConfig
    kv_layout: str = "vllm"
    prompt: int = DEFAULT_PROMPT  # tokens

    def check(self) -> Handoff:
        self.model.check()
        if self.kv_layout not in KV_LAYOUTS:
            raise ConfigError(f"unknown --kv-layout {self.kv_layout!r}: choose one of {', '.join(KV_LAYOUTS)}")
        if self.prompt < 1:
            raise ConfigError(f"--prompt must be at least 1 token, not {self.prompt}")
        return self

    @property
    def blocks(self) -> int:
        """The engine's blocks (LMCache: chunks) the prompt fills."""
        unit = self.model.chunk_tokens if self.kv_layout == "lmcache" else self.model.tokens_per_block
        return math.ceil(self.prompt / unit)

    @property
    def regions(self) -> int:
        """Regions of the pool: each layer's K and V tensors (vllm), or one."""
        return self.model.layers_per_rank * self.model.kv_parts if self.kv_layout == "vllm" else 1

    @property
    def count(self) -> int:
        """Descriptors posted."""
        return self.regions * self.blocks

    @property
    def block_bytes(self) -> int:
        """Bytes of each descriptor."""
        model = self.model
        if self.kv_layout == "vllm":
            return model.page_bytes
        if self.kv_layout == "layer-contiguous":
            return model.page_bytes * model.kv_parts * model.layers_per_rank
        return model.chunk_tokens * model.token_bytes

    @property
    def transfer_bytes(self) -> int:
        return self.count * self.block_bytes

    def shape(
        self,
        layout: str = "contiguous",
        batch: int = 1,
        pool_bytes: int | None = None,
        posting: Posting = AUTO,
        merge: bool = True,
        budget: SmBudget | None = None,
    ) -> BlockShape:
        """The block list: `count` descriptors of `block_bytes`, in `regions` regions of the pool."""
        return BlockShape(
            self.count, layout, batch, pool_bytes, self.regions, posting, merge=merge, budget=budget, handoff=self
        ).check()

    def describe(self) -> str:
        model = self.model
        return (
            f"{model.name} ({model.layers_per_rank} layers, {model.kv_heads_per_rank} KV head(s) of {model.head_dim} "
            f"a rank{', MLA' if model.mla else ''}), {self.kv_layout} layout, a {self.prompt}-token prompt"
        )

    def record(self) -> HandoffRecord:
        """What a results entry keeps of the handoff."""
        return {
            "model": self.model.to_dict(), "kv_layout": self.kv_layout, "prompt_tokens": self.prompt,
            "engine_blocks": self.blocks, "regions": self.regions, "descriptors": self.count,
            "descriptor_bytes": self.block_bytes, "transfer_bytes": self.transfer_bytes,
        }  # fmt: skip


_INTEGERS = {item.name for item in fields(ModelConfig) if item.type == "int"}
# A Hugging Face config.json's names for the same numbers.
_HF_NAMES = {"num_hidden_layers": "layers", "num_key_value_heads": "kv_heads", "head_dim": "head_dim"}


def parse_model(spec: str) -> ModelConfig:
    """--model: a shipped model's name (kvmodels.MODELS) or a JSON file (this module's field names, or a
    Hugging Face config.json), then `,key=value` overrides: `llama-3.1-70b,tp=8,dtype_bytes=1`."""
    name, *overrides = [part.strip() for part in spec.split(",")]
    if name.lower() in MODELS:
        values: dict[str, Any] = {"name": name.lower(), **MODELS[name.lower()]}
    elif os.path.isfile(name):
        values = _from_file(name)
    else:
        raise ConfigError(f"--model {name!r} is neither a model rdmabench knows ({', '.join(MODELS)}) nor a JSON file")
    if overrides:  # the name says what was changed: rows of the report keep them apart
        values["name"] = ",".join([values["name"], *overrides])
    for override in overrides:
        key, sep, text = override.partition("=")
        key = key.strip()
        if not sep or key not in {item.name for item in fields(ModelConfig)} - {"name"}:
            raise ConfigError(
                f"--model {name}: {override!r} is not key=value of {', '.join(sorted(_INTEGERS | {'mla'}))}"
            )
        values[key] = _value(name, key, text.strip())
    return ModelConfig(**values).check()


def _value(name: str, key: str, text: str) -> int | bool:
    if key == "mla":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"--model {name}: mla is true or false, not {text!r}")
        return text.lower() in ("true", "1", "yes")
    if not is_digits(text):
        raise ConfigError(f"--model {name}: {key} takes a whole number, not {text!r}")
    return int(text)


def _from_file(path: str) -> dict[str, Any]:
    """A model config from a JSON file: this module's fields, or a Hugging Face config.json (MLA where
    it has kv_lora_rank: one latent of kv_lora_rank + qk_rope_head_dim a token, blocks of 64)."""
    text = userfiles.read_input(path, _MODEL_FILE_LIMIT, "model config")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--model {path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--model {path}: not a JSON object")
    name = str(data.get("name") or os.path.splitext(os.path.basename(path))[0])
    if "num_hidden_layers" not in data:
        known = {item.name for item in fields(ModelConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"--model {path}: unknown field(s) {', '.join(unknown)}")
        return {**data, "name": name}
    number = functools.partial(_hf_number, path, data)
    values: dict[str, Any] = {ours: number(theirs) for theirs, ours in _HF_NAMES.items() if theirs in data}
    values["name"] = name
    if "kv_lora_rank" in data:
        latent = number("kv_lora_rank") + (number("qk_rope_head_dim", 0) if "qk_rope_head_dim" in data else 0)
        values.update(kv_heads=1, head_dim=latent, mla=True, tokens_per_block=64)
    else:
        heads = number("num_attention_heads") if data.get("num_attention_heads") is not None else None
        values.setdefault("kv_heads", heads)
        if "head_dim" not in values and data.get("hidden_size") is not None and heads:
            values["head_dim"] = number("hidden_size") // heads
    missing = [key for key in ("layers", "kv_heads", "head_dim") if values.get(key) is None]
    if missing:
        raise ConfigError(f"--model {path}: its config.json says nothing of {', '.join(missing)}")
    return values


def _hf_number(path: str, data: Mapping[str, object], key: str, least: int = 1) -> int:
    """A config.json's count `key`: a whole number (a string "32" is refused by name: arithmetic on
    it was a TypeError, or a string made of two)."""
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"--model {path}: its {key} must be a whole number of at least {least}, not {value!r}")
    return value


def handoff(spec: str, kv_layout: str = "vllm", prompt: int | None = None) -> Handoff:
    """The handoff --model spec, --kv-layout and --prompt describe (None: DEFAULT_PROMPT)."""
    return Handoff(parse_model(spec), kv_layout, DEFAULT_PROMPT if prompt is None else prompt).check()


def from_record(model: ModelRecord, kv_layout: str, prompt: int | None) -> Handoff:
    """A handoff from the model a run's options carry (ModelConfig.to_dict)."""
    try:
        config = ModelConfig(**model)
    except TypeError as exc:
        raise ConfigError(f"a model config with fields of its own: {exc}") from None
    return Handoff(config, kv_layout, DEFAULT_PROMPT if prompt is None else prompt).check()
