"""The CPU backend's bf16 GEMM on float tiles (cpu/gemm_bf16.h, tuning bf16_gemm): the weights
and X rounded to bf16 (nearest even), the pairs' products summed in fp32, against float64 NumPy
on the same rounded values, at odd sizes."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu, ops


def bf16(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (nearest, ties to even), as vcvtne2ps2bf16 rounds them."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def tiles(rng, wtype: str, n: int, k: int):
    """Random [n, k] weights as (raw bytes of wtype's rows, their values as float32)."""
    w32 = rng.standard_normal((n, k)).astype(np.float32)
    if wtype == "F32_T32":
        return w32.view(np.uint8), w32
    if wtype == "F16_T32":
        return w32.astype(np.float16).view(np.uint8), w32.astype(np.float16).astype(np.float32)
    bits = (bf16(w32).view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.uint8), bf16(w32)


@pytest.fixture(scope="module")
def bf16_device():
    device = akunu.Device("cpu", tuning="bf16_gemm=1")
    if not device.profile["gemm_bf16"]:
        pytest.skip("the processor has no AVX-512 BF16 (the bf16 GEMM is not registered; fp32 products run)")
    return device


@pytest.mark.parametrize("wtype", ["F32_T32", "F16_T32", "BF16_T32"])
@pytest.mark.parametrize("m, n, k, accumulate", [(9, 33, 37, False), (13, 95, 129, True), (70, 130, 301, False),
                                                 (131, 67, 520, True), (5, 40, 61, False)])
def test_bf16_gemm_rounds_weights_and_x_to_bf16(bf16_device, rng, wtype, m, n, k, accumulate):
    """Rows past the short GEMM's 8 (odd k: a last pair with one element; outputs past whole
    tiles; row blocks past 64, split among threads) take bf16 products: equal to float64 on the
    bf16-rounded operands within fp32 accumulation (1e-5 of the sums' scale), and away from the
    fp32 product by far more than that. Steps of at most 8 rows keep the fp32 short GEMM."""
    device = bf16_device
    raw, w = tiles(rng, wtype, n, k)
    w_dev = device.upload(_akunu.pack_tiles(raw.reshape(-1), wtype, n, k))
    x = rng.standard_normal((m, k)).astype(np.float32)
    y0 = rng.standard_normal((m, n)).astype(np.float32)
    y = device.upload(y0) if accumulate else device.upload(np.full((m, n), np.nan, np.float32))
    ops.gemm(w_dev, device.upload(x), y, wtype=wtype, accumulate=accumulate)
    exact = x.astype(np.float64) @ w.astype(np.float64).T
    rounded = bf16(x).astype(np.float64) @ bf16(w).astype(np.float64).T
    want = rounded if m > 8 else exact
    if accumulate:
        want, exact = want + y0, exact + y0
    scale = np.sqrt(k) * 4
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5 * scale)
    if m > 8:  # the rounding is visible: the test tells bf16 products from fp32 ones
        assert np.abs(y.numpy() - exact).max() > 1e-3 * scale / 4


@pytest.mark.parametrize("head_dim", [64, 40])
def test_bf16_attention_blocks_round_products_to_bf16(bf16_device, rng, head_dim):
    """encoder_attention under bf16_gemm: spans of 8 rows or more run S = Q K^T and O = P V on
    bf16 pairs (Q, K, V and the unnormalized weights exp(s - max) rounded), shorter spans keep
    fp32 dot products; odd span lengths leave a last pair with one key. Scores of order 4 make
    the rounding of Q and K visible: the fp32 result is far outside the tolerance."""
    device, n_heads, lengths = bf16_device, 2, [37, 5, 70]
    width, n = n_heads * head_dim, sum(lengths)
    qkv = rng.standard_normal((n + 2, 3, n_heads, head_dim)).astype(np.float32)
    qkv[:, 0] *= 4
    qkv[n:] = np.nan  # rows past n_tokens stay NaN in out
    seq = np.concatenate([np.tile([start, length], (length, 1)) for start, length in
                          zip(np.cumsum([0] + lengths[:-1]), lengths)] + [np.zeros((2, 2))]).astype(np.uint32)
    out = device.upload(np.full((n + 2, width), np.nan, np.float32))
    ops.encoder_attention(device.upload(qkv.reshape(n + 2, -1)), device.upload(seq), out, n_heads, head_dim,
                          n_tokens=n)
    got = out.numpy()[:n].reshape(n, n_heads, head_dim)
    want, exact = np.empty_like(got, np.float64), np.empty_like(got, np.float64)
    for r in range(n):
        s, length = seq[r]
        q, k, v = (qkv[r, 0], qkv[s:s + length, 1], qkv[s:s + length, 2])
        for out_, rounded in ((exact, False), (want, length >= 8)):
            f = bf16 if rounded else (lambda a: a)
            scores = np.einsum("hd,lhd->hl", f(q).astype(np.float64), f(k).astype(np.float64)) / np.sqrt(head_dim)
            p = np.exp(scores - scores.max(-1, keepdims=True))
            out_[r] = np.einsum("hl,lhd->hd", f(p.astype(np.float32)), f(v).astype(np.float64)) / p.sum(-1)[:, None]
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-4)
    assert np.abs(got - exact).max() > 1e-2
    assert np.isnan(out.numpy()[n:]).all()
