"""Builds GGUF files byte by byte (gguf.md layout), so tests can make valid and broken ones."""
from __future__ import annotations

import struct

import numpy as np

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B", U64: "<Q",
        I64: "<q", F64: "<d"}


def gstr(s) -> bytes:
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def value(vtype: int, v) -> bytes:
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(value(etype, x) for x in items)
    return struct.pack(_FMT[vtype], v)


def kv(key, vtype: int, v) -> bytes:
    return gstr(key) + struct.pack("<I", vtype) + value(vtype, v)


def tensor_info(name, ne: list[int], ggml_type: int, offset: int) -> bytes:
    return gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + \
        struct.pack("<IQ", ggml_type, offset)


def gguf(kvs: list[bytes], infos: list[bytes], data: bytes = b"", version: int = 3, align: int = 32,
         n_tensors: int | None = None, n_kv: int | None = None, magic: bytes = b"GGUF") -> bytes:
    head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(infos)
    pad = (-len(body)) % align
    return body + b"\0" * pad + data


def tiny_llama_gguf(dim=32, layers=1, heads=2, kv_heads=1, ffn=48, vocab=16, extra: list[bytes] = (),
                    fill: dict | None = None) -> bytes:
    """A valid llama GGUF with F32 weights (ggml ne order: [in, out]), plus `extra` key/values;
    `fill` {tensor name: value} sets every element of those tensors."""
    hd = dim // heads
    kvs = [kv("general.architecture", STR, "llama"), kv("llama.block_count", U32, layers),
           kv("llama.embedding_length", U32, dim), kv("llama.attention.head_count", U32, heads),
           kv("llama.attention.head_count_kv", U32, kv_heads), kv("llama.feed_forward_length", U32, ffn),
           kv("llama.context_length", U32, 128), kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)]
    keys = {k[8:8 + int.from_bytes(k[:8], "little")] for k in extra}
    kvs = [k for k in kvs if k[8:8 + int.from_bytes(k[:8], "little")] not in keys] + list(extra)
    shapes = {"token_embd.weight": [dim, vocab], "output_norm.weight": [dim]}
    for i in range(layers):
        shapes |= {f"blk.{i}.attn_norm.weight": [dim], f"blk.{i}.attn_q.weight": [dim, heads * hd],
                   f"blk.{i}.attn_k.weight": [dim, kv_heads * hd], f"blk.{i}.attn_v.weight": [dim, kv_heads * hd],
                   f"blk.{i}.attn_output.weight": [heads * hd, dim], f"blk.{i}.ffn_norm.weight": [dim],
                   f"blk.{i}.ffn_gate.weight": [dim, ffn], f"blk.{i}.ffn_up.weight": [dim, ffn],
                   f"blk.{i}.ffn_down.weight": [ffn, dim]}
    infos, data = [], b""
    rng = np.random.default_rng(0)
    for name, ne in shapes.items():
        infos.append(tensor_info(name, ne, 0, len(data)))
        values = rng.standard_normal(int(np.prod(ne))).astype(np.float32)
        if fill and name in fill:
            values[:] = fill[name]
        blob = values.tobytes()
        data += blob + b"\0" * ((-len(blob)) % 32)
    return gguf(kvs, infos, data)
