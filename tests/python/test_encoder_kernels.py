"""The encoder's kernels (layernorm, GELU, packed bidirectional attention, pooling) against
float64 NumPy on odd sizes, with outputs poisoned with NaN first and rows that must not be
read or written poisoned too."""
from __future__ import annotations

import math

import numpy as np
import pytest

from akunu import ops


def poisoned(device, shape, dtype=np.float32):
    return device.upload(np.full(shape, np.nan, dtype))


@pytest.mark.parametrize("rows, dim", [(1, 1), (3, 77), (5, 1000), (2, 5003)])
def test_layernorm(device, rng, rows, dim):
    # A large mean and a small spread: a one-pass variance would lose the spread.
    x = (rng.standard_normal((rows, dim)) * 0.5 + 40.0).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    b = rng.standard_normal(dim).astype(np.float32)
    y = poisoned(device, (rows, dim))
    ops.layernorm(device.upload(x), device.upload(w), device.upload(b), y, eps=1e-12)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-12) * w + b
    if dim == 1:
        want = np.broadcast_to(b, (rows, dim))  # x - mean is 0: y = b
    np.testing.assert_allclose(y.numpy(), want, rtol=0, atol=5e-5 * max(1.0, np.abs(w).max()))


def test_layernorm_skips_rows_past_n_tokens(device, rng):
    x = rng.standard_normal((6, 33)).astype(np.float32)
    y = poisoned(device, (6, 33))
    ops.layernorm(device.upload(x), device.upload(np.ones(33, np.float32)), device.upload(np.zeros(33, np.float32)), y,
                  n_tokens=4)
    got = y.numpy()
    assert np.isfinite(got[:4]).all() and np.isnan(got[4:]).all()


@pytest.mark.parametrize("n", [1, 257, 65_537])
def test_gelu(device, rng, n):
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    out = poisoned(device, n)
    ops.gelu(device.upload(x), out)
    x64 = x.astype(np.float64)
    want = 0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2)))
    np.testing.assert_allclose(out.numpy(), want, rtol=0, atol=1e-6 * max(1.0, np.abs(x64).max()))


@pytest.mark.parametrize("n_heads, head_dim", [(1, 8), (3, 32), (2, 100)])
@pytest.mark.parametrize("lengths", [[1], [5, 1, 17], [70, 3, 130]])
def test_encoder_attention_stays_inside_each_sequence(device, rng, n_heads, head_dim, lengths):
    width = n_heads * head_dim
    n = sum(lengths)
    rows = n + 3  # rows past n_tokens: NaN in qkv, must stay NaN in out
    qkv = rng.standard_normal((rows, 3 * width)).astype(np.float32)
    qkv[n:] = np.nan
    seq = np.zeros((rows, 2), np.uint32)
    start = 0
    for length in lengths:
        seq[start:start + length] = (start, length)
        start += length
    out = poisoned(device, (rows, width))
    scale = 1 / math.sqrt(head_dim)
    ops.encoder_attention(device.upload(qkv), device.upload(seq), out, n_heads, head_dim, n_tokens=n)
    got = out.numpy()
    q64 = qkv.astype(np.float64).reshape(rows, 3, n_heads, head_dim)
    want = np.empty((n, n_heads, head_dim))
    for r in range(n):
        s, length = seq[r]
        k, v = q64[s:s + length, 1], q64[s:s + length, 2]          # [len, heads, head_dim]
        scores = np.einsum("hd,lhd->hl", q64[r, 0], k) * scale
        p = np.exp(scores - scores.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        want[r] = np.einsum("hl,lhd->hd", p, v)
    np.testing.assert_allclose(got[:n], want.reshape(n, width), rtol=0, atol=2e-5)
    assert np.isnan(got[n:]).all()


@pytest.mark.parametrize("dim", [1, 96, 1001])
@pytest.mark.parametrize("mode", ["mean", "cls"])
@pytest.mark.parametrize("normalize", [False, True])
def test_pool(device, rng, dim, mode, normalize):
    lengths = [3, 1, 40, 7]
    n = sum(lengths)
    h = rng.standard_normal((n + 2, dim)).astype(np.float32)
    h[n:] = np.nan  # rows no text owns
    max_texts = len(lengths) + 2
    texts = np.zeros(4 + 2 * max_texts, np.uint32)
    texts[:4] = (len(lengths), 1 if mode == "cls" else 0, int(normalize), 0)
    starts = np.cumsum([0] + lengths[:-1])
    texts[4:4 + 2 * len(lengths)] = np.stack([starts, lengths], 1).ravel()
    out = poisoned(device, (max_texts, dim))
    ops.pool(device.upload(h), device.upload(texts), out)
    h64 = h.astype(np.float64)
    want = np.stack([h64[s] if mode == "cls" else h64[s:s + length].mean(0) for s, length in zip(starts, lengths)])
    if normalize:
        want /= np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-12)
    got = out.numpy()
    np.testing.assert_allclose(got[:len(lengths)], want, rtol=0, atol=2e-6)
    assert np.isnan(got[len(lengths):]).all()
