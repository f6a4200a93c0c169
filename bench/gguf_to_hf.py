#!/usr/bin/env python3
"""A float llama GGUF (f16, bf16 or f32 matrices, as make_random_gguf.py writes them) as a
Hugging Face checkpoint directory: config.json and one model.safetensors, tensors under HF's
names. So that the HF load path and its decode (RoPE on (i, i + head_dim / 2)) can be timed on
the same weights as the GGUF benchmark files.

llama.cpp's converter reorders each head's Q and K rows for GGUF's adjacent-pair RoPE; this
puts them back, so both files compute the same function (tests/python/test_bench_tools.py
holds akunu's logits for the two to each other).

    python bench/gguf_to_hf.py /tmp/1b-f16.gguf /tmp/1b-f16-hf
    python -m akunu bench /tmp/1b-f16-hf
"""
from __future__ import annotations

import argparse
import json
import pathlib
import struct
import sys

import numpy as np
from gguf import GGUFReader

# ggml's float types, named as safetensors names them, and as config.json's torch_dtype.
TORCH_DTYPE = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}


def field(reader: GGUFReader, key: str):
    f = reader.fields[key]
    value = f.parts[f.data[0]]
    return bytes(value).decode() if f.types[0].name == "STRING" else value.item()


def hf_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """GGUF's Q or K rows (per head: pairs (2 f, 2 f + 1) adjacent) in HF's order (pairs
    (f, f + head_dim / 2)): the inverse of llama.cpp's convert_hf_to_gguf permute."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def convert(src: pathlib.Path, out: pathlib.Path) -> None:
    r = GGUFReader(str(src))
    arch = field(r, "general.architecture")
    if arch != "llama":
        raise SystemExit(f"{src}: architecture '{arch}'; only llama files convert")
    heads, kv_heads = field(r, "llama.attention.head_count"), field(r, "llama.attention.head_count_kv")
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                 "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                 "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj"}
    tensors = []  # (HF name, ggml float type = safetensors dtype, array in HF's row order)
    for t in r.tensors:
        kind = t.tensor_type.name
        if kind not in TORCH_DTYPE:
            raise SystemExit(f"{src}: {t.name} is {kind}; only float files (F16, BF16, F32) convert")
        a = np.asarray(t.data)
        if kind == "BF16":  # gguf-py hands bf16 over as bytes; safetensors takes the same bits
            a = a.reshape(-1).view(np.uint16)
        a = a.reshape([int(n) for n in reversed(t.shape)])  # ggml's shape is innermost first
        if t.name.startswith("blk."):
            _, layer, role, _ = t.name.split(".")
            name = f"model.layers.{layer}.{per_layer[role]}.weight"
            if role in ("attn_q", "attn_k"):
                a = hf_rows(a, heads if role == "attn_q" else kv_heads)
        else:
            name = names[t.name]
        tensors.append((name, kind, a))

    out.mkdir(parents=True, exist_ok=True)
    header, offset = {}, 0
    for name, dtype, a in tensors:
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors", "wb") as f:  # streamed: a 7b file is 13 GB
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, a in tensors:
            np.ascontiguousarray(a).tofile(f)

    dim = field(r, "llama.embedding_length")
    dtype = TORCH_DTYPE[next(kind for _, kind, a in tensors if a.ndim == 2)]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim,
        "intermediate_size": field(r, "llama.feed_forward_length"),
        "num_hidden_layers": field(r, "llama.block_count"),
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": dim // heads,
        "rms_norm_eps": field(r, "llama.attention.layer_norm_rms_epsilon"),
        "rope_theta": field(r, "llama.rope.freq_base"),
        "max_position_embeddings": field(r, "llama.context_length"),
        "vocab_size": len(r.fields["tokenizer.ggml.tokens"].data),
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": dtype,
        "bos_token_id": field(r, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field(r, "tokenizer.ggml.eos_token_id"),
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(r)))


def tokenizer_json(r: GGUFReader) -> dict:
    """The file's SentencePiece vocabulary as a Llama-2-style tokenizer.json: BPE with byte
    fallback, no merges (so text splits into single characters or bytes; the benchmarks feed
    token ids, and the vocabulary of random files is made up anyway)."""
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode() for i in f.data]
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for i, t in enumerate(tokens[:3])]
    return {
        "version": "1.0", "added_tokens": special,
        "normalizer": {"type": "Sequence",
                       "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                       {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence",
                    "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                 {"type": "ByteFallback"}, {"type": "Fuse"},
                                 {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": []},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path, help="the checkpoint directory to write")
    a = ap.parse_args()
    convert(a.gguf, a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
