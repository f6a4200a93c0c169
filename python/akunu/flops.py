"""The arithmetic of a model's tokens, for benchmarks that report TFLOP/s beside the tensor peak.

A token crosses every weight matrix once: 2 operations (a multiply and an add) per weight. The
token embedding is a lookup, not a product; tied embeddings count once, as the head. Attention
adds, for a query at position t in a layer, 2 * q_dim * (t + 1) to score the keys and as many to
mix the values. Sliding-window layers are counted as full ones, so their models' figures are an
upper bound on the work done.

    w = matrix_weights("model.gguf")
    token_flops(w, config, 512) / seconds / 1e12   # TFLOP/s of a 512-token prompt
"""
from __future__ import annotations

import math

from akunu import _akunu

# Tensors read by lookup, not multiplied: the token embeddings under the names the loaders know.
EMBEDDING_NAMES = ("token_embd", "embed_tokens", "word_embeddings", "wte")

# Dense f16/bf16 tensor throughput with f32 accumulation, TFLOP/s, from the vendors' data sheets
# (without sparsity), by a substring of the device's name: the denominator of "of peak". Longer
# substrings first, so that a PCIe H100 does not match the SXM row. `--peak-tflops` overrides it.
TENSOR_PEAKS = (("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4))


def matrix_weights(path) -> int:
    """The weights of the matrices one token multiplies (every 2-D tensor but the embeddings; the
    embedding once more where the head is tied to it)."""
    files = _akunu.open_model(str(path))
    total = 0
    for t in files.tensors:
        shape = tuple(t["shape"])
        if len(shape) == 2 and not any(name in t["name"] for name in EMBEDDING_NAMES):
            total += shape[0] * shape[1]
    config = _akunu.load_config(files)
    if config.tied_embeddings:
        total += config.vocab_size * config.dim
    return total


def attention_flops(config, start: int, n: int) -> float:
    """Attention's operations for n tokens at positions start .. start + n - 1 (each attends its
    position and every one before it)."""
    keys = n * start + n * (n + 1) / 2  # the sum of t + 1 over the n positions
    return 4.0 * config.q_dim * config.n_layers * keys


def token_flops(weights: int, config, n: int, start: int = 0) -> float:
    """Operations of n tokens of one sequence after `start` cached positions: a prompt of n
    tokens, or n decode steps (the same products, run a step at a time)."""
    return 2.0 * weights * n + attention_flops(config, start, n)


def tensor_peak(device_name: str, override: float | None = None) -> float | None:
    """The device's dense f16 tensor peak in TFLOP/s: `override` where given, else the data sheet's
    for a device TENSOR_PEAKS names, else None (the benchmarks then print TFLOP/s alone)."""
    if override is not None:
        peak = float(override)
        if not math.isfinite(peak) or peak <= 0:
            raise ValueError(f"--peak-tflops must be a positive number of TFLOP/s, not {override!r}")
        return peak
    for name, peak in TENSOR_PEAKS:
        if name in device_name:
            return peak
    return None


def share(tflops: float, peak: float | None) -> str:
    """'186' or '186 (19%)': TFLOP/s (two significant digits below 10: '0.0041'), and its share of
    the peak where one is known."""
    text = f"{tflops:,.0f}" if tflops >= 10 else f"{tflops:.2g}"
    return text + (f" ({tflops / peak:.0%})" if peak else "")
