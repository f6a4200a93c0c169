"""Kernels against NumPy on odd sizes, outputs poisoned with NaN first; plus shape errors and
the self-check the main job runs."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import ops, selfcheck


def poisoned(device, shape, dtype):
    return device.upload(np.full(shape, np.nan, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n", [1, 255, 257, 65_537])
def test_fill_and_add(device, rng, dtype, n):
    out = poisoned(device, n, dtype)
    ops.fill(out, -2.5)
    assert np.all(out.numpy() == -2.5)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    c = poisoned(device, n, dtype)
    ops.add(device.upload(a), device.upload(b), c)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(c.numpy(), want)


@pytest.mark.parametrize("words", [3, 4096, 50_001])
def test_copy(device, rng, words):
    src = rng.integers(0, 2**32, words, dtype=np.uint32)
    dst = device.upload(np.full(words + 4, 0xFFFFFFFF, np.uint32))
    ops.copy(device.upload(src), dst)
    got = dst.numpy()
    np.testing.assert_array_equal(got[:words], src)
    assert np.all(got[words:] == 0xFFFFFFFF)


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float16, 2e-3)])
@pytest.mark.parametrize("rows, dim", [(1, 1), (3, 77), (4, 1000), (2, 5003)])
@pytest.mark.parametrize("weight_offset", [0.0, 1.0])
def test_rmsnorm(device, rng, dtype, rtol, rows, dim, weight_offset):
    x = (rng.standard_normal((rows, dim)) * 3).astype(dtype)
    w = rng.standard_normal(dim).astype(dtype)
    y = poisoned(device, (rows, dim), dtype)
    ops.rmsnorm(device.upload(x), device.upload(w), y, eps=1e-6, weight_offset=weight_offset)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt(np.mean(x64**2, axis=-1, keepdims=True) + 1e-6) * (w.astype(np.float64) + weight_offset)
    np.testing.assert_allclose(y.numpy().astype(np.float64), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("wtype", [np.float16, np.float32])
@pytest.mark.parametrize("rows, k", [(1, 1), (5, 3), (31, 64), (129, 1003), (1000, 4096)])
def test_gemv(device, rng, wtype, rows, k):
    w = rng.standard_normal((rows, k)).astype(wtype)
    x = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(device.upload(w), device.upload(x), y)
    want = w.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("wtype, k", [(np.float32, 37), (np.float16, 256), (np.float32, 1000)])
def test_gemv_with_a_folded_rmsnorm(device, rng, wtype, k):
    """The decode projections read x through the preceding RMSNorm (odd k takes the scalar
    path): the same as norming first, then the GEMV."""
    rows = 7
    w = rng.standard_normal((rows, k)).astype(wtype)
    x = (rng.standard_normal(k) * 3).astype(np.float32)
    g = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(device.upload(w), device.upload(x), y, norm=device.upload(g), eps=1e-6, weight_offset=1.0)
    xd = x.astype(np.float64)
    normed = xd / np.sqrt(np.mean(xd * xd) + 1e-6) * (g + 1.0)
    np.testing.assert_allclose(y.numpy(), w.astype(np.float64) @ normed, rtol=1e-4, atol=1e-4 * np.sqrt(k) * 3)


@pytest.mark.parametrize("wtype, block_bytes, scales", [("Q8_0", 34, [0]), ("Q4_0", 18, [0]), ("Q4_1", 20, [0, 2])])
@pytest.mark.parametrize("rows, k", [(1, 32), (7, 96), (130, 1024)])
def test_gemv_quantized(device, rng, wtype, block_bytes, scales, rows, k):
    """Raw ggml blocks straight into the kernel, against akunu's CPU dequantizer (itself
    checked against gguf-py)."""
    from akunu import _akunu
    raw = rng.integers(0, 256, (rows * k // 32, block_bytes), dtype=np.uint8)
    for off in scales:
        raw[:, off:off + 2] = rng.uniform(-0.05, 0.05, raw.shape[0]).astype(np.float16).view(np.uint8).reshape(-1, 2)
    x = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(device.upload(raw.reshape(-1)), device.upload(x), y, wtype=wtype)
    w = _akunu.dequantize(raw.reshape(-1), wtype).astype(np.float64).reshape(rows, k)
    want = w @ x.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(w).max() * np.sqrt(k))


@pytest.mark.parametrize("wtype", ["Q8_0", "Q4_0", "Q4_1", np.float32, np.float16, "bf16"])
@pytest.mark.parametrize("m, n, k", [(1, 7, 32), (37, 67, 96), (130, 65, 64)])
def test_gemm(device, rng, wtype, m, n, k):
    """The prefill GEMM over odd tile remainders (rows and outputs not multiples of 64), each
    weight type against float64 NumPy on the same weights."""
    from akunu import _akunu
    blocks = {"Q8_0": (34, [0]), "Q4_0": (18, [0]), "Q4_1": (20, [0, 2])}
    if wtype in blocks:
        block_bytes, scales = blocks[wtype]
        raw = rng.integers(0, 256, (n * k // 32, block_bytes), dtype=np.uint8)
        for off in scales:
            raw[:, off:off + 2] = rng.uniform(-0.05, 0.05, raw.shape[0]).astype(np.float16).view(np.uint8).reshape(-1, 2)
        w_dev = device.upload(raw.reshape(-1))
        w = _akunu.dequantize(raw.reshape(-1), wtype).astype(np.float64).reshape(n, k)
    elif wtype == "bf16":
        bits = (rng.standard_normal((n, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        w_dev = device.upload(bits.view(np.uint8).reshape(-1))
        w = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        wtype = "BF16"
    else:
        w_host = rng.standard_normal((n, k)).astype(wtype)
        w_dev, w, wtype = device.upload(w_host), w_host.astype(np.float64), None
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = poisoned(device, [m, n], np.float32)
    ops.gemm(w_dev, device.upload(x), y, wtype=wtype)
    want = x.astype(np.float64) @ w.T
    # fp32 accumulation, or f16 operands on the cooperative-matrix path
    rtol = 2e-3 if device.profile["gemm_coopmat"] else 1e-4
    np.testing.assert_allclose(y.numpy(), want, rtol=rtol, atol=rtol * np.abs(w).max() * np.sqrt(k) * 4)


def test_wrong_shapes_are_clear_errors(device):
    w = device.empty([10, 10], "f16")
    x = device.empty([5], "f32")
    y = device.empty([10], "f32")
    with pytest.raises(akunu.Error, match="gemv: x needs 40 bytes"):
        ops.gemv(w, x, y)
    with pytest.raises(akunu.Error, match="no variant for dtype u8"):
        ops.fill(device.allocate(64), 1.0)
    with pytest.raises(ValueError, match="2-D"):
        ops.gemv(x, x, y)


def test_selfcheck_passes_and_can_fail(device):
    results = selfcheck.run(device)
    assert results and all(r.passed for r in results), selfcheck.format_table(results)
    bad = selfcheck.CheckResult("x", "[1]", float("nan"), 1.0, 0.0)
    assert not bad.passed  # an unwritten (NaN) output is a failure


def test_kernel_names_come_from_the_variant_table():
    names = akunu.kernel_names()
    for expected in ("fill_f32", "fill_f16", "add_f16", "rmsnorm_f32", "gemv_f16"):
        assert expected in names
