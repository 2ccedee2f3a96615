"""Public model shapes for KV-cache handoffs (--model NAME): numbers only, no weights.

Each entry is what a model's published config.json says about its KV cache (num_hidden_layers,
num_key_value_heads, head_dim, or hidden_size / num_attention_heads where head_dim is absent), with
the defaults an engine serves it with: bf16 (2 bytes) and vLLM's 16 tokens per block. DeepSeek-V3's
attention is MLA: each layer caches one latent of kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576
values a token, shared by every head (so one "head" of 576, and no K/V split), in blocks of 64 tokens
(the block size vLLM's MLA kernels take). Checked against the models' config.json files:

- meta-llama/Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 128 (128 KiB a token in bf16)
- meta-llama/Llama-3.1-70B: 80 layers, 8 KV heads, head_dim 128 (hidden 8192 / 64 heads)
- Qwen/Qwen2.5-7B: 28 layers, 4 KV heads, head_dim 128 (hidden 3584 / 28 heads)
- deepseek-ai/DeepSeek-V3: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 (70,272 bytes a token)
"""

from __future__ import annotations

from typing import TypedDict


class _Shape(TypedDict):
    layers: int
    kv_heads: int
    head_dim: int


class ShippedModel(_Shape, total=False):
    """A model's KV shape as shipped: its layers, KV heads and head size; MLA and its block size where it has them."""

    mla: bool
    tokens_per_block: int


MODELS: dict[str, ShippedModel] = {
    "llama-3.1-8b": {"layers": 32, "kv_heads": 8, "head_dim": 128},
    "llama-3.1-70b": {"layers": 80, "kv_heads": 8, "head_dim": 128},
    "qwen2.5-7b": {"layers": 28, "kv_heads": 4, "head_dim": 128},
    "deepseek-v3": {"layers": 61, "kv_heads": 1, "head_dim": 576, "mla": True, "tokens_per_block": 64},
}
