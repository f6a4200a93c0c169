"""Writes safetensors files byte by byte, so tests can build valid and deliberately broken ones."""
from __future__ import annotations

import json
import struct

import numpy as np

DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int8): "I8",
          np.dtype(np.uint8): "U8", np.dtype(np.uint32): "U32", np.dtype(np.int32): "I32"}


def safetensors_bytes(tensors: dict[str, np.ndarray], header_override: dict | None = None) -> bytes:
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    if header_override:
        header.update(header_override)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_model_dir(path, tensors: dict[str, np.ndarray], config: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").write_bytes(safetensors_bytes(tensors))
    (path / "config.json").write_text(json.dumps(config))


def tiny_llama(dim=64, layers=2, heads=4, kv_heads=2, ffn=96, vocab=128, rng=None):
    """A consistent tiny llama checkpoint (HF names) and its config.json."""
    rng = rng or np.random.default_rng(0)
    hd = dim // heads
    w = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    t = {"model.embed_tokens.weight": w(vocab, dim), "model.norm.weight": w(dim), "lm_head.weight": w(vocab, dim)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t |= {p + "input_layernorm.weight": w(dim), p + "post_attention_layernorm.weight": w(dim),
              p + "self_attn.q_proj.weight": w(heads * hd, dim), p + "self_attn.k_proj.weight": w(kv_heads * hd, dim),
              p + "self_attn.v_proj.weight": w(kv_heads * hd, dim), p + "self_attn.o_proj.weight": w(dim, heads * hd),
              p + "mlp.gate_proj.weight": w(ffn, dim), p + "mlp.up_proj.weight": w(ffn, dim),
              p + "mlp.down_proj.weight": w(dim, ffn)}
    config = {"model_type": "llama", "hidden_size": dim, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "intermediate_size": ffn, "vocab_size": vocab,
              "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    return t, config
