"""The CPU backend's prefill GEMM with x rounded to 8 bits (tuning int8_gemm, gemm_vnni8.cpp)
against NumPy: x rounded per block of 32 as llama.cpp's q8_0 (scale max|x| / 127, round half to
even, in float32), then multiplied in float64 with the weights dequantized by gguf-py. Odd sizes:
rows not a multiple of the 6-row register block, outputs not a multiple of the 32-row tile or
the 64-column panel, k past one 256-element panel."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu, ops
from akunu._akunu import kernels
from support.kernel_cases import poisoned, random_weight_blocks

TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


def _has_vnni() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_vnni" in f.read().split()
    except OSError:
        return False


@pytest.fixture(scope="module")
def device():
    d = akunu.Device("cpu", tuning="int8_gemm=1")
    if "AVX-512" not in d.profile["name"] or not _has_vnni():
        pytest.skip(f"the 8-bit GEMM needs AVX-512 VNNI ({d.profile['name']}; /proc/cpuinfo has no avx512_vnni)")
    return d


def round_x8(x: np.ndarray) -> np.ndarray:
    """x [m, k] rounded as the kernel rounds it, returned as float64."""
    blocks = x.astype(np.float32).reshape(x.shape[0], -1, 32)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    d = amax / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=amax != 0)
    q = np.rint(blocks * inv)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


@pytest.mark.parametrize("wtype", TYPES)
@pytest.mark.parametrize("m, n, units", [(1, 7, 1), (7, 67, 2), (13, 100, 1), (29, 33, 3)])
def test_gemm_x8_matches_numpy_on_rounded_x(device, rng, wtype, m, n, units):
    k = units * (256 if wtype.endswith("_K") else 288)  # 288: nine blocks of 32, past one panel
    raw, w = random_weight_blocks(rng, wtype, n, k)
    tiled = kernels.tile_type(device, wtype)
    w_dev = device.upload(_akunu.pack_tiles(raw.reshape(-1), tiled, n, k))
    x = rng.standard_normal((m, k)).astype(np.float32)
    x[0, :32] *= 1e-3  # a block of small values: its own scale
    x[-1, 32:64] = 0.0  # an all-zero block
    y = poisoned(device, [m, n], np.float32)
    ops.gemm(w_dev, device.upload(x), y, wtype=tiled)
    want = round_x8(x) @ w.T
    scale = np.abs(w).max() * np.sqrt(k)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5 * scale)
    # The rounding is what the reference models: the exact product of x lies well outside.
    assert np.abs(x.astype(np.float64) @ w.T - want).max() > 1e-3 * scale
