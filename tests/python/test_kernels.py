"""Kernels against NumPy on odd sizes, outputs poisoned with NaN first; plus shape errors and
the self-check the main job runs."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu, ops, selfcheck
from akunu._akunu import kernels
from support.kernel_cases import (  # noqa: F401 (fixtures)
    GPU_FORMATS,
    TILE_FORMATS,
    device,
    float_gemv_shape,
    gated_reference,
    kernel_wtype,
    poisoned,
    random_weight_blocks,
    random_weight_blocks_on,
    random_weights,
    row_length,
    tile_gemv_units,
    tiles_on,
)


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


@pytest.mark.parametrize("vectors", [1, 255, 4099])
def test_read_reads_every_vector_and_stores_nothing_else(device, rng, vectors):
    """The benchmark's read kernel stores only when a 16-byte vector is all ones: a marked
    vector anywhere in the range (the first, the last, one in between) must be found, read from
    an offset, and marks outside the range or none at all must leave the flag alone."""
    src = rng.integers(0, 2**32 - 1, (16 + vectors + 1, 4), dtype=np.uint32)  # never all ones
    src[[0, 16 + vectors]] = 0xFFFFFFFF  # just before and just past the range read
    flag, unmarked = device.upload(np.full(4, 7, np.uint32)), device.upload(src)
    ops._run(flag.device, lambda cl: kernels.read(cl, unmarked, flag, vectors * 16, src_offset=256))
    assert list(flag.numpy()) == [7, 7, 7, 7]
    for v in sorted({0, vectors // 2, vectors - 1}):
        marked = src.copy()
        marked[16 + v] = 0xFFFFFFFF
        marked = device.upload(marked)  # a CommandList does not keep its buffers alive
        ops._run(flag.device, lambda cl: kernels.read(cl, marked, flag, vectors * 16, src_offset=256))
        assert flag.numpy()[0] == v, f"vector {v} of {vectors}"
    with pytest.raises(RuntimeError, match="16-byte"):
        ops._run(flag.device, lambda cl: kernels.read(cl, flag, flag, 12))


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


@pytest.mark.parametrize("variant", ["scalar", pytest.param("coopmat", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("wtype", [*GPU_FORMATS, *TILE_FORMATS, np.float32, np.float16, "bf16"])
@pytest.mark.parametrize("m, n, units", [(1, 7, 1), (13, 300, 5), (16, 257, 2), (29, 70, 6), (37, 67, 3), (130, 65, 2),
                                         (67, 257, 9)])
def test_gemm(device, rng, variant, wtype, m, n, units):
    """The prefill GEMM over odd tile remainders (rows and outputs not multiples of the 64 or
    128 tiles), each weight type against float64 NumPy on the same weights; both variants where
    the device has cooperative matrices. Where the device takes short tiles (gemm_short_tiles),
    up to 64 rows run the scalar GEMM's 16 x 256 tiles (lavapipe), up to 96 the cooperative-matrix
    GEMM's 16 x 32 ones, with k past the latter's 256-column steps (units 5, 6, 9)."""
    coopmat = variant == "coopmat"
    if coopmat and not device.profile["gemm_coopmat"]:
        pytest.skip("the device has no cooperative matrices (lavapipe runs only the scalar GEMM)")
    k = row_length(wtype, units)
    w_dev, w, wname = random_weights(device, rng, wtype, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = poisoned(device, [m, n], np.float32)
    ops.gemm(w_dev, device.upload(x), y, wtype=wname, coopmat=coopmat)
    want = x.astype(np.float64) @ w.T
    rtol = 2e-3 if coopmat else 1e-4  # f16 operands on the cooperative-matrix path, else fp32 throughout
    np.testing.assert_allclose(y.numpy(), want, rtol=rtol, atol=rtol * np.abs(w).max() * np.sqrt(k) * 4)


@pytest.mark.gpu
@pytest.mark.parametrize("wtype", ["Q4_0", "Q8_0_T32", np.float16, np.float32])
@pytest.mark.parametrize("m, n, k", [(1, 7, 32), (37, 67, 96), (130, 257, 1056)])
def test_gemm_reads_x_as_halves(device, rng, wtype, m, n, k):
    """The cooperative-matrix GEMM with X given as halves (a prefill chunk's norms and activation
    write them there) equals the same GEMM given those halves' values as f32: bit for bit, over
    odd row counts and k past the 32-wide tile steps. Tile weights at few rows run gemm_rows.comp,
    which rounds halves to int16 a block of 32 as the GEMVs round x and keeps f32 X's float
    products: there the two differ by at most that rounding, half a step of each block's scale
    (max |x| / 32767) times |w|, summed along k."""
    if not device.profile["gemm_coopmat"]:
        pytest.skip("the device has no cooperative matrices (lavapipe runs only the scalar GEMM, which takes f32 X)")
    w_dev, w, wname = random_weights(device, rng, wtype, n, k)
    x = rng.standard_normal((m, k)).astype(np.float16).astype(np.float32)
    y32, y16 = poisoned(device, [m, n], np.float32), poisoned(device, [m, n], np.float32)
    ops.gemm(w_dev, device.upload(x), y32, wtype=wname, coopmat=True)
    ops.gemm(w_dev, device.upload(x.astype(np.float16)), y16, wtype=wname, coopmat=True)
    if wtype in TILE_FORMATS and m <= kernels.gemm_tile_rows(device, wname):
        step = np.repeat(np.abs(x).reshape(m, k // 32, 32).max(axis=2) / 32767 / 2, 32, axis=1)
        bound = step.astype(np.float64) @ np.abs(np.asarray(w, np.float64)).T
        assert np.all(np.abs(y16.numpy() - y32.numpy()) <= bound * 1.01 + 1e-6), "beyond int16 rounding of x"
        return
    np.testing.assert_array_equal(y16.numpy(), y32.numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("m, n, k", [(97, 257, 1056), (130, 65, 40), (300, 1000, 520), (300, 2500, 1024),
                                     (256, 640, 512), (200, 4100, 512), (520, 4100, 512)])
def test_gemm_on_workgroup_cooperative_matrices(device, rng, m, n, k, accumulate):
    """gemm_cm2_f16 (VK_NV_cooperative_matrix2), which takes f16 W with X as halves past the
    short tiles' 96 rows, over row, output and k counts that leave partial tiles (128 or 64
    outputs x 128 rows) and k steps, and with k a multiple of the unrolled steps (1024, 512),
    where tiles inside both matrices take unclamped loads: against float64 NumPy on the same
    halves (f32 accumulation: 1e-4 of the sums' scale), Y poisoned first, or holding values it
    must add to. Outputs past 2,048 take the narrow tile in a row window of their own where the
    wide tiles would leave compute units idle (kernels_gemm.cpp, cm2_narrow_rows): 4,100 outputs
    at 200 rows run it alone, at 520 rows the wide tile's window runs instead."""
    if not device.profile["gemm_coopmat2"]:
        pytest.skip("needs a GPU with VK_NV_cooperative_matrix2 and a build with AKUNU_SLANG_GLSLANG "
                    "(shaders/kernels.cmake)")
    w = rng.standard_normal((n, k)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    y0 = rng.standard_normal((m, n)).astype(np.float32)
    y = device.upload(y0) if accumulate else poisoned(device, [m, n], np.float32)
    ops.gemm(device.upload(w), device.upload(x), y, coopmat=True, accumulate=accumulate)
    want = x.astype(np.float64) @ w.astype(np.float64).T + (y0 if accumulate else 0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("m, n, k", [(97, 257, 1056), (300, 1000, 520), (300, 700, 1024), (512, 384, 2048),
                                     (130, 2200, 512)])
def test_gemm_gated_on_workgroup_cooperative_matrices(device, rng, m, n, k, activation, monkeypatch):
    """gemm_gated: a chunk's gate and up GEMMs and the activation in one dispatch, the product
    written as halves, over row, output and k counts that leave partial tiles (64 outputs x 128
    rows; 128 outputs past 2,048) and k steps, and k a multiple of the unrolled steps (1024, 2048,
    512), where the tiles inside take unclamped loads: against float64 NumPy on the same halves
    (one f16 rounding of the output plus f32 accumulation: 2e-3 of the output's scale), out
    poisoned."""
    # The engine's A/B switch (gemm_gated=0) does not skip the kernel's test.
    monkeypatch.delenv("AKUNU_TUNE", raising=False)
    if not kernels.gemm_fuses_gated(device, activation, m, n, k):
        pytest.skip("needs a GPU with VK_NV_cooperative_matrix2 and indirect counts, and a build with "
                    "AKUNU_SLANG_GLSLANG (shaders/kernels.cmake)")
    w_gate = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    w_up = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    x = (rng.standard_normal((m, k)) * 2).astype(np.float16)
    out = poisoned(device, [m, n], np.float16)
    ops.gemm_gated(device.upload(w_gate), device.upload(w_up), device.upload(x), out, activation=activation)
    x64 = x.astype(np.float64)
    want = gated_reference(x64 @ w_gate.astype(np.float64).T, x64 @ w_up.astype(np.float64).T, activation)
    got = out.numpy().astype(np.float64)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())


@pytest.mark.gpu
def test_gemm_gated_keeps_to_its_row_window(device, rng, monkeypatch):
    """Outside min_rows <= m < max_rows gemm_gated writes nothing (a chunk's table records it
    for the long chunks beside the short tiles' GEMMs and act_*, which write the same rows)."""
    m, n, k = 130, 64, 256
    # The engine's A/B switch (gemm_gated=0) does not skip the kernel's test.
    monkeypatch.delenv("AKUNU_TUNE", raising=False)
    if not kernels.gemm_fuses_gated(device, "silu", m, n, k):
        pytest.skip("needs a GPU with VK_NV_cooperative_matrix2 and indirect counts, and a build with "
                    "AKUNU_SLANG_GLSLANG (shaders/kernels.cmake)")
    w = device.upload(rng.standard_normal((n, k)).astype(np.float16))
    x = device.upload(rng.standard_normal((m, k)).astype(np.float16))
    for lo, hi in [(m + 1, 0), (0, m)]:
        out = poisoned(device, [m, n], np.float16)
        ops.gemm_gated(w, w, x, out, min_rows=lo, max_rows=hi)
        assert np.isnan(out.numpy()).all()


def test_gemm_gated_refuses_what_it_cannot_run(device):
    """Devices without cooperative matrix 2 (lavapipe, the CPU backend) and f32 X get a clear
    error naming what the fused kernel needs, not a wrong result."""
    w = device.upload(np.ones((64, 256), np.float16))
    out = device.empty([130, 64], "f16")
    if kernels.gemm_fuses_gated(device, "silu", 130, 64, 256):
        with pytest.raises(akunu.Error, match="X must be f16"):
            ops.gemm_gated(w, w, device.upload(np.ones((130, 256), np.float32)), out)
    else:
        with pytest.raises(akunu.Error, match="cooperative matrix 2"):
            ops.gemm_gated(w, w, device.upload(np.ones((130, 256), np.float16)), out)
    with pytest.raises(ValueError, match="W_up must be"):
        ops.gemm_gated(w, device.upload(np.ones((64, 128), np.float16)), device.upload(np.ones((130, 256), np.float16)),
                       out)


def test_gemm_refuses_halves_it_cannot_read(device, rng):
    """X as halves needs the cooperative-matrix GEMM and k a multiple of 8: anything else is a
    clear error, not a kernel reading halves as floats."""
    x = device.upload(rng.standard_normal((3, 36)).astype(np.float16))
    y = device.empty([3, 5], "f32")
    w = device.upload(rng.standard_normal((5, 36)).astype(np.float16))
    with pytest.raises(akunu.Error, match="f16 X"):
        ops.gemm(w, x, y, coopmat=False)


@pytest.mark.parametrize("variant", ["scalar", pytest.param("coopmat", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("wtype", ["Q8_0", np.float16])
def test_gemm_runs_only_inside_its_row_window(device, rng, variant, wtype):
    """A recorded prefill GEMM with a row window runs for chunks of min_rows <= n_tokens <
    max_rows tokens and leaves Y untouched otherwise (the dequantizing prefill records two
    GEMMs per projection, one for short chunks and one for long ones)."""
    coopmat = variant == "coopmat"
    if coopmat and not device.profile["gemm_coopmat"]:
        pytest.skip("the device has no cooperative matrices (lavapipe runs only the scalar GEMM)")
    m, n, k = 37, 67, 96
    w_dev, w, wname = random_weights(device, rng, wtype, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    want = x.astype(np.float64) @ w.T
    for lo, hi, runs in [(m + 1, 0, False), (0, m, False), (m, m + 1, True), (0, 0, True)]:
        y = poisoned(device, [m, n], np.float32)
        ops.gemm(w_dev, device.upload(x), y, wtype=wname, coopmat=coopmat, min_rows=lo, max_rows=hi)
        if runs:
            np.testing.assert_allclose(y.numpy(), want, rtol=2e-3, atol=2e-3 * np.abs(w).max() * np.sqrt(k) * 4)
        else:
            assert np.isnan(y.numpy()).all(), f"window [{lo}, {hi}) ran for {m} rows"


@pytest.mark.parametrize("wtype", [*GPU_FORMATS, *TILE_FORMATS])
@pytest.mark.parametrize("rows, units", [(1, 1), (7, 3), (33, 2)])
def test_dequant_f16(device, backend, rng, wtype, rows, units):
    """Block-format weights as halves (the f16 matrix a long prefill chunk's GEMM reads), each
    the reference weight rounded to f16, within one ulp: the k-quants' fp32 products round once
    more, and Q4_1's and Q5_1's d * code + m, where a device does not fuse it in f16 (lavapipe), rounds the
    product first, an ulp of the row's largest weights."""
    if backend == "cpu":
        pytest.skip("the CPU backend's prefill reads block formats directly: it has no dequantizing kernel")
    k = row_length(wtype, units)
    w_dev, w, wname = random_weights(device, rng, wtype, rows, k)
    out = poisoned(device, [rows, k], np.float16)
    ops.dequant_f16(w_dev, out, wname)
    want = w.astype(np.float16).astype(np.float64)
    row_ulp = 2 ** -10 * np.abs(w).max(axis=1, keepdims=True) if wtype.startswith(("Q4_1", "Q5_1")) else 2 ** -24
    np.testing.assert_array_less(np.abs(out.numpy().astype(np.float64) - want),
                                 2 ** -10 * np.abs(want) + row_ulp + 1e-30)


@pytest.mark.parametrize("wtype", [*GPU_FORMATS, np.float32, np.float16, "bf16"])
@pytest.mark.parametrize("units", [1, 3, 9])
def test_embed(device, rng, wtype, units):
    """Embedding rows of every weight type, scaled, for ids that repeat and include the first
    and last rows of the table."""
    vocab, dim = 37, row_length(wtype, units) - (0 if wtype in GPU_FORMATS else 1)  # odd float rows
    w_dev, w, wname = random_weights(device, rng, wtype, vocab, dim)
    ids = np.array([vocab - 1, 0, 5, 5, 17], np.uint32)
    out = poisoned(device, [len(ids), dim], np.float32)
    ops.embed(w_dev, device.upload(ids), out, wtype=wname, scale=0.75)
    np.testing.assert_allclose(out.numpy(), 0.75 * w[ids], rtol=1e-6, atol=0)


@pytest.mark.parametrize("on", ["session device", "cpu"])
@pytest.mark.parametrize("wtype", ["Q8_0", np.float32])
def test_embed_checks_ids(device, rng, wtype, on):
    """An id past the table: ops.embed raises naming it (the CPU backend used to crash on id
    1,000,000 and both backends read zeros for id 4); the kernel itself (called directly) reads
    nothing past W and leaves that row as it was, on every backend (the session's device, and
    the CPU backend whatever the session runs on)."""
    if on == "cpu":
        device = akunu.Device("cpu")
    vocab, dim = 4, row_length(wtype, 1)
    w_dev, w, wname = random_weights(device, rng, wtype, vocab, dim)
    for bad in (vocab, 1_000_000, 2**32 - 1):
        out = poisoned(device, [2, dim], np.float32)
        with pytest.raises(ValueError, match=f"token id {bad} is out of range for a table of {vocab} rows"):
            ops.embed(w_dev, device.upload(np.array([1, bad], np.uint32)), out, wtype=wname)
        step = device.upload(np.array([0, 0, 2, 0], dtype=np.uint32))
        ids = device.upload(np.array([1, bad], np.uint32))
        out = device.upload(np.full([2, dim], 7.0, np.float32))
        ops._run(device, lambda cl: kernels.embed(cl, w_dev, wname or w_dev.dtype, vocab, ids, step, out, dim, 1.0, 2))
        got = out.numpy()
        np.testing.assert_allclose(got[0], w[1], rtol=1e-6)
        assert (got[1] == 7.0).all()
    with pytest.raises(ValueError, match="token_ids holds 1 ids, out has 2 rows"):
        ops.embed(w_dev, device.upload(np.array([1], np.uint32)), poisoned(device, [2, dim], np.float32), wtype=wname)


@pytest.mark.parametrize("rows, n, n_tokens", [(1, 1, 1), (1, 2049, 1), (5, 301, 5), (7, 257, 3)])
def test_softcap(device, rng, rows, n, n_tokens):
    """x = 30 tanh(x / 30) on the first n_tokens rows, with logits far past the cap (and
    infinities) saturating to +-cap; the rows after n_tokens keep their values."""
    x = (rng.standard_normal((rows, n)) * 40).astype(np.float32)
    x[0, 0], x[-1, -1] = 1e30, -np.inf
    buf = device.upload(x)
    ops.softcap(buf, 30.0, n_tokens)
    want = x.copy()
    want[:n_tokens] = (30.0 * np.tanh(x[:n_tokens].astype(np.float64) / 30.0)).astype(np.float32)
    np.testing.assert_allclose(buf.numpy(), want, rtol=2e-6, atol=2e-5)
    with pytest.raises(akunu.Error, match="softcap: the cap must be a positive number"):
        ops.softcap(buf, 0.0)


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
    # k-quant rows are whole 256-element super-blocks
    with pytest.raises(akunu.Error, match=r"gemv: k = 300 is not a whole number of Q4_K blocks \(256 elements each\)"):
        ops.gemv(device.allocate(144 * 2), device.empty([300], "f32"), y, wtype="Q4_K")


@pytest.mark.parametrize("wtype", ["Q3_K", "Q2_K", "Q8_1"])
def test_unsupported_weight_types_are_named_with_the_supported_ones(device, wtype):
    """Types akunu knows but no kernel reads: the error names the type and lists the others."""
    supported = ("F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MLX4_G32, MLX4_G64, MLX4_G128, "
                 "MLX8_G32, MLX8_G64, MLX8_G128")
    block, nbytes = next((t["block_size"], t["block_bytes"]) for t in _akunu.tensor_types() if t["name"] == wtype)
    w, x, y = device.allocate(nbytes * 2), device.empty([2 * block], "f32"), device.empty([1], "f32")
    with pytest.raises(akunu.Error,
                       match=rf"gemv: weight type {wtype} is not supported yet \(supported: {supported}\)"):
        ops.gemv(w, x, y, wtype=wtype)


def test_selfcheck_passes_and_can_fail(device):
    results = selfcheck.run(device)
    assert results and all(r.passed for r in results), selfcheck.format_table(results)
    bad = selfcheck.CheckResult("x", "[1]", float("nan"), 1.0, 0.0)
    assert not bad.passed  # an unwritten (NaN) output is a failure


def test_kernel_names_come_from_the_variant_table():
    names = akunu.kernel_names()
    for expected in ("fill_f32", "fill_f16", "add_f16", "rmsnorm_f32", "gemv_f16"):
        assert expected in names


@pytest.mark.parametrize("wtype", ["F32_T32", "F16_T32", "BF16_T32"])
@pytest.mark.parametrize("m, n, k", [(1, 33, 37), (2, 64, 37), (3, 95, 129), (5, 130, 61), (8, 67, 37)])
def test_gemm_of_a_few_rows_on_float_tiles(device, backend, rng, wtype, m, n, k):
    """The CPU backend's short GEMM on float tiles (beam search's decoder steps: each weight
    column converted once for all the rows) against float64 NumPy on the same rounded weights:
    odd k, outputs past a whole tile, 1 to 8 rows."""
    if backend != "cpu":
        pytest.skip("float tile-major weights are the CPU backend's layout")
    w32 = rng.standard_normal((n, k)).astype(np.float32)
    if wtype == "F32_T32":
        raw, w = w32.view(np.uint8), w32.astype(np.float64)
    elif wtype == "F16_T32":
        raw, w = w32.astype(np.float16).view(np.uint8), w32.astype(np.float16).astype(np.float64)
    else:
        bits = (w32.view(np.uint32) >> 16).astype(np.uint16)
        raw, w = bits.view(np.uint8), (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    w_dev = device.upload(_akunu.pack_tiles(raw.reshape(-1), wtype, n, k))
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = poisoned(device, [m, n], np.float32)
    ops.gemm(w_dev, device.upload(x), y, wtype=wtype)
    want = x.astype(np.float64) @ w.T
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5 * np.sqrt(k) * 4)


@pytest.mark.parametrize("variant", ["scalar", pytest.param("coopmat", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("m, n, k, n_tokens", [(37, 67, 96, 20), (512, 640, 512, 100), (512, 4100, 512, 300),
                                               (384, 1000, 1024, 129)])
def test_gemm_writes_only_the_chunks_tokens(device, rng, variant, m, n, k, n_tokens):
    """A GEMM recorded for m rows that steps a chunk of n_tokens computes and writes its first
    n_tokens rows of Y, whatever X holds past them (NaN here: a shorter chunk leaves an earlier
    one's values there). On cm2 the last token tile reads those rows unclamped up to m and keeps
    only its chunk's sums (gemm_cm2.comp): over partial tiles of the narrow (640
    outputs) and the wide tile (4,100 at 300 rows), and k a multiple of the unrolled steps."""
    coopmat = variant == "coopmat"
    if coopmat and not device.profile["gemm_coopmat"]:
        pytest.skip("the device has no cooperative matrices (lavapipe runs only the scalar GEMM)")
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    x[n_tokens:] = np.nan
    x_dev = device.upload(x if coopmat else x.astype(np.float32))
    y = poisoned(device, [m, n], np.float32)
    ops.gemm(device.upload(w), x_dev, y, coopmat=coopmat, n_tokens=n_tokens)
    got = y.numpy()
    want = x[:n_tokens].astype(np.float64) @ w.astype(np.float64).T
    np.testing.assert_allclose(got[:n_tokens], want, rtol=1e-4, atol=1e-4)  # f16 operands, f32 sums of scale ~1
    assert np.isnan(got[n_tokens:]).all(), "rows past the chunk's tokens were written"


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, n_tokens", [(512, 640, 512, 100), (384, 2200, 1024, 129)])
def test_gemm_gated_writes_only_the_chunks_tokens(device, rng, m, n, k, n_tokens, monkeypatch):
    """gemm_gated, as test_gemm_writes_only_the_chunks_tokens: rows past n_tokens hold NaN in X
    and keep the poison in out; the chunk's rows equal float64 NumPy (2e-3 of the scale)."""
    monkeypatch.delenv("AKUNU_TUNE", raising=False)
    if not kernels.gemm_fuses_gated(device, "silu", m, n, k):
        pytest.skip("needs a GPU with VK_NV_cooperative_matrix2 and indirect counts, and a build with "
                    "AKUNU_SLANG_GLSLANG (shaders/kernels.cmake)")
    w_gate = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    w_up = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    x = (rng.standard_normal((m, k)) * 2).astype(np.float16)
    x[n_tokens:] = np.nan
    out = poisoned(device, [m, n], np.float16)
    ops.gemm_gated(device.upload(w_gate), device.upload(w_up), device.upload(x), out, n_tokens=n_tokens)
    x64 = x[:n_tokens].astype(np.float64)
    want = gated_reference(x64 @ w_gate.astype(np.float64).T, x64 @ w_up.astype(np.float64).T, "silu")
    got = out.numpy().astype(np.float64)
    np.testing.assert_allclose(got[:n_tokens], want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
    assert np.isnan(got[n_tokens:]).all(), "rows past the chunk's tokens were written"


@pytest.mark.parametrize("n", [1, 255, 257, 4096 * 3 + 5])
def test_to_half(device, rng, n):
    """f32 as halves, the X of an O GEMM that reads halves where attention wrote f32: each value
    one of the two halves around it (a device may round to nearest or toward zero), exact where
    the f32 is a half; halves past n keep the poison (n not a multiple of the 256-wide groups)."""
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-12, 9, n))).astype(np.float32)  # |x| < 65,504
    x[: min(n, 8)] = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 6.1e-5, 1 / 3, -1e-3], np.float32)[: min(n, 8)]
    out = poisoned(device, [n + 300], np.float16)
    ops.to_half(device.upload(x), out)
    got = out.numpy()
    near = x.astype(np.float16)
    # A half's step at |x|: 2^13 f32 steps for normal halves, 2^-24 below them.
    step = np.maximum(np.spacing(np.abs(near).astype(np.float32)) * 2.0**13, 2.0**-24)
    assert np.all(np.abs(got[:n].astype(np.float64) - x) < step), "a half is not one of the two around its f32"
    exact = near.astype(np.float32) == x
    np.testing.assert_array_equal(got[:n][exact], near[exact])
    assert np.isnan(got[n:]).all(), "wrote past n"
