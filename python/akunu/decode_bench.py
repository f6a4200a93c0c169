"""Decode benchmark: tokens/s at batch 1, and the fraction of the memory-bandwidth floor.

The floor is the bytes a decode step must read (every weight once, plus the KV cache rows
attended to) over the device's measured copy bandwidth. `python -m akunu decode-bench FILE...`.
"""
from __future__ import annotations

import time

from akunu import kernel_bench
from akunu.model import Model


def copy_bandwidth(device) -> float:
    """Bytes/s of the copy kernel over 1 GiB (read + write)."""
    row = kernel_bench.run(device, scale=1.0 if device.profile["type"] != "cpu" else 1 / 16)[0]
    return row.gb_per_s * 1e9


def run(path: str, tokens: int = 128, bandwidth: float | None = None, chain: int = 0) -> dict:
    """Greedy decode of `tokens` tokens in chains (`chain` steps per submission; 0: the
    device profile's choice, 1: one token per submission)."""
    m = Model(path, context=tokens + 64, progress=False, chain=chain)
    e = m._engine
    c = m.config
    k = e.chain
    tokens = max(k, tokens // k * k)
    e.decode_chain(1) if k > 1 else e.decode(1)  # warm
    e.reset()
    t0 = time.perf_counter()
    if k > 1:  # pipelined: two chains in flight, the CPU reading one while the GPU runs the next
        e.chain_start(1)
        for n in range(tokens // k):
            e.chain_next(n + 2 < tokens // k)
        e.truncate(0)
    else:
        token = 1
        for _ in range(tokens):
            e.decode(token)
            token = e.sampled_token()
    seconds = time.perf_counter() - t0
    weights = m.memory_report()["weights"][1]
    kv_row = 2 * c.n_kv_heads * c.head_dim * 2  # K and V, f16, per layer and position
    kv_read = c.n_layers * kv_row * (tokens + 1) / 2  # mean over the run
    out = {"file": path, "chain": k, "tokens": tokens, "tok_per_s": tokens / seconds, "weights_bytes": weights,
           "bytes_per_token": weights + kv_read}
    if bandwidth:
        out["floor_tok_per_s"] = bandwidth / out["bytes_per_token"]
        out["fraction_of_floor"] = out["tok_per_s"] / out["floor_tok_per_s"]
    return out


def format_table(rows: list[dict], bandwidth: float) -> str:
    lines = [f"decode at batch 1; floor = bytes per token / {bandwidth / 1e12:.2f} TB/s (copy kernel)",
             f"{'file':<28}{'chain':>6}{'GB/token':>10}{'tok/s':>10}{'floor':>10}{'of floor':>10}"]
    for r in rows:
        name = r["file"].rsplit("/", 1)[-1]
        lines.append(f"{name:<28}{r['chain']:>6}{r['bytes_per_token'] / 1e9:>10.3f}{r['tok_per_s']:>10.1f}"
                     f"{r['floor_tok_per_s']:>10.0f}{r['fraction_of_floor']:>10.1%}")
    return "\n".join(lines)
