"""Kernels against NumPy on odd sizes, outputs poisoned with NaN first; plus shape errors and
the self-check the main job runs."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import akunu
from akunu import _akunu, ops, selfcheck
from akunu._akunu import kernels
from support.ggml_blocks import BLOCK_FORMATS, random_blocks
from support.int8_x import x_as_int_blocks

_DEVICES = {}


def _device(backend, tuning=""):
    """One device per backend and tuning, made once: pipelines stay cached across tests."""
    if (backend, tuning) not in _DEVICES:
        _DEVICES[backend, tuning] = akunu.Device(backend, tuning=tuning)
    return _DEVICES[backend, tuning]


@pytest.fixture
def device(backend, request):
    """Each backend in turn (conftest.py `backend`): the CPU kernels hold to the same references.
    A test that uses a shape fixture (float_gemv_shape, tile_gemv_units) gets a device tuned to
    that kernel geometry (tuning gemv_rows, gemv_tiles)."""
    shapes = [request.getfixturevalue(name) for name in ("float_gemv_shape", "tile_gemv_units")
              if name in request.fixturenames]
    return _device(backend, ",".join(s for s in shapes if s))


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


@pytest.fixture(params=["shape of the device", "wide loads"])
def float_gemv_shape(request):
    """gemv.comp's float rows in the device's own shape, and in the GPUs' shape for 16-bit floats
    (128 invocations, 8 weights per 16-byte load: WIDE), which lavapipe does not take itself."""
    return "gemv_rows=128:4:1:1" if request.param == "wide loads" else ""


@pytest.fixture(params=["units of the device", "4 units", "whole rows"])
def tile_gemv_units(request, backend):
    """gemv_tiles.comp with the blocks each invocation loads per round as the device takes them
    (1 on lavapipe, with one invocation a row), and 4, what GPUs that report their compute
    units take for GEMVs of 4-bit blocks with no more tiles than units and fp32 x, with rows
    split over 4 invocations on CPU-type devices (16 on GPUs); and the shape such GPUs take for
    those GEMVs with rounded x: rows split over 32 invocations (8 on CPU-type devices), x for
    the whole row staged at once (kernels.cpp gemv_tiles_shape)."""
    cpu_type = _device(backend).profile["type"] == "cpu"
    if request.param == "4 units":
        return f"gemv_tiles={4 if cpu_type else 16}:4"
    if request.param == "whole rows":
        return f"gemv_tiles={8 if cpu_type else 32}:2:1024"
    return ""


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("wtype", [np.float16, np.float32, "bf16"])
@pytest.mark.parametrize("rows, k", [(1, 1), (5, 3), (31, 64), (129, 1003), (1000, 4096), (3, 4104)])
def test_gemv(device, rng, wtype, rows, k):
    w_dev, w, w_arg = random_weights(device, rng, wtype, rows, k)
    x = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(w_dev, device.upload(x), y, wtype=w_arg)
    want = w @ x.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4 * np.sqrt(k) * np.abs(w).max())


@pytest.mark.usefixtures("float_gemv_shape")
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


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("wtype", [np.float16, np.float32, "bf16"])
@pytest.mark.parametrize("dim, k, readers", [(7, 37, 5), (130, 1000, 33), (1001, 256, 9)])
@pytest.mark.parametrize("weight_offset", [0.0, 1.0])
def test_gemv_hands_the_next_norm_forward(device, backend, rng, wtype, dim, k, readers, weight_offset):
    """A float decode step's O and down projections add into the residual stream and hand the
    next RMSNorm forward: residual += W x, normed = residual * (g + offset), and one sum of
    squares per workgroup; a GEMV given those sums reads normed as the norm's output. Against
    float64 NumPy: the residual, normed, the sums' total, and the reader's y; nothing written
    past the rows or the sums (NaN poison). Odd sizes leave the last workgroup part-filled, and
    odd k takes the scalar path."""
    name = kernel_wtype(device, wtype)
    if backend == "cpu":
        assert not kernels.gemv_hands_norm_forward(device, name, name)
        pytest.skip("the CPU backend forms each norm in the GEMV that reads it")
    assert kernels.gemv_hands_norm_forward(device, name, name)
    w_dev, w, _ = random_weights(device, rng, wtype, dim, k)
    r_dev, r, _ = random_weights(device, rng, wtype, readers, dim)
    x = rng.standard_normal(k).astype(np.float32)
    residual = (rng.standard_normal(dim + 1) * 3).astype(np.float32)
    residual[dim] = np.nan  # past the rows: must stay
    g = rng.standard_normal(dim).astype(np.float32)
    partials = kernels.gemv_norm_partials(device, name, dim)
    assert 1 <= partials <= dim
    res_dev = device.upload(residual)
    normed, sums = poisoned(device, dim + 1, np.float32), poisoned(device, partials + 1, np.float32)
    y = poisoned(device, readers + 1, np.float32)
    x_dev, g_dev = device.upload(x), device.upload(g)

    def record(cl):
        kernels.gemv(cl, w_dev, name, x_dev, res_dev, dim, k, accumulate=True, next_norm=g_dev,
                     next_norm_offset=weight_offset, normed=normed, norm_sums=sums)
        kernels.gemv(cl, r_dev, name, normed, y, readers, dim, eps=1e-6, ready_sums=sums, ready_partials=partials)
    ops._run(device, record)
    want = residual[:dim].astype(np.float64) + w @ x.astype(np.float64)
    got = res_dev.numpy()
    np.testing.assert_allclose(got[:dim], want, rtol=1e-4, atol=1e-4 * np.sqrt(k) * np.abs(w).max() * 3)
    assert np.isnan(got[dim])
    res = got[:dim].astype(np.float64)  # what the kernel wrote: the reference for the rest
    g64 = g.astype(np.float64) + weight_offset
    np.testing.assert_allclose(normed.numpy()[:dim], res * g64, rtol=1e-6, atol=1e-6 * np.abs(res * g64).max())
    assert np.isnan(normed.numpy()[dim])
    got_sums = sums.numpy()
    np.testing.assert_allclose(got_sums[:partials].astype(np.float64).sum(), (res**2).sum(), rtol=1e-5)
    assert np.isnan(got_sums[partials])
    v = res * g64 / np.sqrt(np.mean(res**2) + 1e-6)
    np.testing.assert_allclose(y.numpy()[:readers], r @ v, rtol=1e-4,
                               atol=1e-4 * np.sqrt(dim) * np.abs(r).max() * np.abs(v).max())
    assert np.isnan(y.numpy()[readers])


def test_gemv_norm_forward_refuses_what_it_cannot_run(device, backend):
    """A norm is handed forward only by a float GEMV that accumulates and has no norm of its own,
    with all three of its outputs, and read only by float GEMVs with enough sums: clear errors
    otherwise, before anything runs. The CPU backend takes neither side."""
    f = np.ones((8, 64), np.float32)
    w, x = device.upload(f), device.upload(np.ones(64, np.float32))
    y, g = device.empty([8], "f32"), device.empty([8], "f32")
    normed, sums = device.empty([8], "f32"), device.empty([8], "f32")
    out = dict(next_norm=g, normed=normed, norm_sums=sums)
    if backend == "cpu":
        with pytest.raises(akunu.Error, match="F32 weights hand no norm forward on this device"):
            ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, accumulate=True, **out))
        with pytest.raises(akunu.Error, match="F32 weights take no norm handed forward on this device"):
            ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, ready_sums=sums, ready_partials=2))
        return
    with pytest.raises(akunu.Error, match="adds into the residual stream"):
        ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, **out))
    with pytest.raises(akunu.Error, match="adds into the residual stream"):
        ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, norm_weight=x, accumulate=True, **out))
    with pytest.raises(akunu.Error, match="needs next_norm, normed and norm_sums"):
        ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, accumulate=True, next_norm=g))
    with pytest.raises(akunu.Error, match="not both"):
        ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, norm_weight=x, ready_sums=sums,
                                                 ready_partials=2))
    with pytest.raises(akunu.Error, match="needs its sums of squares"):
        ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, ready_sums=sums, ready_partials=0))
    with pytest.raises(akunu.Error, match="sums of squares"):
        ops._run(device, lambda cl: kernels.gemv(cl, w, "F32", x, y, 8, 64, ready_sums=sums, ready_partials=9))
    q8 = device.upload(np.zeros(8 * 2 * 34, np.uint8))
    with pytest.raises(akunu.Error, match="Q8_0 weights take no norm handed forward"):
        ops._run(device, lambda cl: kernels.gemv(cl, q8, "Q8_0", x, y, 8, 64, ready_sums=sums, ready_partials=2))
    with pytest.raises(akunu.Error, match="Q8_0 weights hand no norm forward"):
        ops._run(device, lambda cl: kernels.gemv(cl, q8, "Q8_0", x, y, 8, 64, accumulate=True, **out))
    assert not kernels.gemv_hands_norm_forward(device, "Q8_0", "F16")


def gated_reference(x, up, activation):
    """act(x) * up in float64, from the formulas of SiLU and GELU's tanh approximation."""
    x, up = x.astype(np.float64), up.astype(np.float64)
    if activation == "silu":
        return x / (1.0 + np.exp(-x)) * up
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))) * up


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("wtype, rows, k", [(np.float32, 7, 37), (np.float16, 9, 1000), ("Q8_0", 33, 512),
                                            ("Q4_0", 5, 8192 + 512), ("Q4_1", 17, 2048), ("Q6_K", 3, 768)])
def test_gemv_with_a_folded_activation(device, rng, activation, wtype, rows, k):
    """The down projection reads act(gate) * up itself (x = gate, binding 3 = up): the same as
    the activation first, then the GEMV. Float rows (odd k takes the scalar path), the word GEMV
    of the 32-element formats (k past 8192 in two slices), gemv.comp's block path (Q6_K)."""
    w_dev, w, w_arg = random_weights(device, rng, wtype, rows, k)
    gate = (rng.standard_normal(k) * 3).astype(np.float32)
    up = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(w_dev, device.upload(gate), y, wtype=w_arg, up=device.upload(up), activation=activation,
             x_rounding="float")
    v = gated_reference(gate, up, activation)
    np.testing.assert_allclose(y.numpy(), w @ v, rtol=1e-4, atol=2e-5 * np.abs(w).max() * np.sqrt(k) * np.abs(v).max())


def test_gemv_folds_one_input_op(device):
    x = device.upload(np.ones(64, np.float32))
    with pytest.raises(akunu.Error, match="a norm or a gated activation, not both"):
        ops.gemv(device.upload(np.ones((2, 64), np.float32)), x, device.empty([2], "f32"), norm=x, up=x)
    with pytest.raises(akunu.Error, match="activation must be 'silu' or 'gelu_tanh'"):
        ops.gemv(device.upload(np.ones((2, 64), np.float32)), x, device.empty([2], "f32"), up=x, activation="relu")


# The ggml block formats the kernels read in place.
GPU_FORMATS = ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"]


def random_weight_blocks(rng, wtype, rows, k):
    """Random but valid raw blocks of W [rows, k] (uint8 [blocks, block bytes]) and W as
    float64, dequantized by gguf-py (llama.cpp's own reference, independent of akunu), which
    akunu's CPU dequantizer must match exactly."""
    gguf = pytest.importorskip("gguf", reason="gguf-py dequantizes the reference weights")
    raw = random_blocks(rng, wtype, rows * k)
    want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[wtype]).reshape(rows, k)
    np.testing.assert_array_equal(_akunu.dequantize(raw.reshape(-1), wtype).reshape(rows, k), want)
    return raw, want.astype(np.float64)


def random_weight_blocks_on(device, rng, wtype, rows, k):
    """random_weight_blocks, uploaded: (buffer, W as float64, wtype)."""
    raw, w = random_weight_blocks(rng, wtype, rows, k)
    return device.upload(raw.reshape(-1)), w, wtype


# Their tile-major forms (32-row tiles, formats/tiles.h), in which the engine uploads projection
# matrices of these types: the CPU backend's kernels and Vulkan's gemv_tiles.comp and W_TILES.
# Tests name the CPU's form; tiles_on() gives the device's (Vulkan: *_T32V, 16-byte chunks).
TILE_FORMATS = ["Q8_0_T32", "Q4_0_T32", "Q4_1_T32"]


def tiles_on(device, wtype):
    """The device's tile form of a TILE_FORMATS name: Vulkan devices keep 16-byte chunks."""
    return kernels.tile_type(device, wtype[:-4])


def random_weights(device, rng, wtype, rows, k):
    """W [rows, k] of any weight type on the device: (buffer, W as float64, the wtype argument
    of ops: the ggml name for raw blocks, tiles and bf16 bits, None where the buffer's dtype says it)."""
    if wtype in GPU_FORMATS:
        return random_weight_blocks_on(device, rng, wtype, rows, k)
    if wtype in TILE_FORMATS:
        raw, w = random_weight_blocks(rng, wtype[:-4], rows, k)
        tiled = tiles_on(device, wtype)
        return device.upload(_akunu.pack_tiles(raw.reshape(-1), tiled, rows, k)), w, tiled
    if wtype == "bf16":
        bits = (rng.standard_normal((rows, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        w = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return device.upload(bits.view(np.uint8).reshape(-1)), w, "BF16"
    w = rng.standard_normal((rows, k)).astype(wtype)
    return device.upload(w), w.astype(np.float64), None


def kernel_wtype(device, wtype):
    """The wtype argument of kernels.*: NumPy float types by their ggml names, tiles in the
    device's form, others as given."""
    if wtype in TILE_FORMATS:
        return tiles_on(device, wtype)
    return {np.float32: "F32", np.float16: "F16"}.get(wtype, wtype)


def row_length(wtype, units):
    """k = units blocks of 32 (float types and 32-element blocks) or of 256 (k-quants)."""
    return units * (BLOCK_FORMATS[wtype][0] if wtype in GPU_FORMATS else 32)


@pytest.mark.parametrize("base, head, chunk", [("Q8_0", 2, 4), ("Q4_0", 2, 4), ("Q4_1", 4, 4), ("Q8_0", 2, 16),
                                               ("Q4_0", 2, 16), ("Q4_1", 4, 16)])
def test_tile_layout_bytes(rng, base, head, chunk):
    """Where pack_tiles puts each byte (formats/tiles.h, weights.glsl's w_tile_* addressing): in
    block column b of a tile, row r's head field f at 64 f + 2 r, then its codes in chunks of
    4 bytes (*_T32) or 16 (*_T32V), chunk c of row r at 32 * head + (32 c + r) * chunk. Rows past
    the matrix are zero."""
    rows, k, block = 37, 96, {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20}[base]
    raw = rng.integers(0, 256, (rows, k // 32, block), dtype=np.uint8)
    tiled = _akunu.pack_tiles(raw.reshape(-1), base + ("_T32" if chunk == 4 else "_T32V"), rows, k)
    want = np.zeros((2, k // 32, 32 * block), np.uint8)  # rows 37..63 stay zero
    for r in range(rows):
        for b in range(k // 32):
            column, rr = want[r // 32, b], r % 32
            for f in range(head // 2):
                column[64 * f + 2 * rr: 64 * f + 2 * rr + 2] = raw[r, b, 2 * f: 2 * f + 2]
            codes = raw[r, b, head:]
            for c in range(codes.size // chunk):
                at = 32 * head + (32 * c + rr) * chunk
                column[at: at + chunk] = codes[c * chunk: (c + 1) * chunk]
    np.testing.assert_array_equal(tiled, want.reshape(-1))


@pytest.mark.parametrize("wtype", TILE_FORMATS)
@pytest.mark.parametrize("rows, k", [(1, 32), (7, 96), (33, 1280), (67, 4096 + 96), (5, 9600)])
@pytest.mark.parametrize("x_op", ["x", "norm", "silu", "gelu_tanh"])
def test_gemv_tiles(device, backend, rng, wtype, rows, k, x_op):
    """Tile-major blocks: partial tiles (rows not a multiple of 32, whose padding rows must not
    be written), rows of 1 to 300 blocks (x staged in slices of 128 blocks), and each input op
    folded: the RMSNorm, and the gated activations of the down projection."""
    w_dev, w, wname = random_weights(device, rng, wtype, rows, k)
    x = rng.standard_normal(k).astype(np.float32)
    g = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows + 3, np.float32)  # 3 floats past the rows: must stay poisoned
    x_dev, g_dev = device.upload(x), device.upload(g)
    norm = g_dev if x_op == "norm" else None
    up, act = (g_dev, x_op) if x_op in ("silu", "gelu_tanh") else (None, "silu")
    ops._run(device, lambda cl: kernels.gemv(cl, w_dev, wname, x_dev, y, rows, k, norm, 1e-6, 1.0, "float", up=up,
                                                  activation=act))
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    if x_op == "norm":
        v = xd * (gd + 1.0) / np.sqrt(np.mean(xd ** 2) + 1e-6)
    elif x_op == "silu":
        v = xd / (1.0 + np.exp(-xd)) * gd
    elif x_op == "gelu_tanh":
        v = 0.5 * xd * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (xd + 0.044715 * xd ** 3))) * gd
    else:
        v = xd
    got = y.numpy()
    # fp32 sums on Vulkan; the CPU backend rounds x to 16 bits per block of 32 (within 2^-16 of
    # the block's largest |x|), about ten times that.
    scale = 1e-5 if backend == "vulkan" else 1e-4
    np.testing.assert_allclose(got[:rows], w @ v, rtol=1e-4,
                               atol=scale * np.abs(w).max() * np.sqrt(k) * np.abs(v).max())
    assert np.isnan(got[rows:]).all(), "a padding row of the last tile was written"


@pytest.mark.parametrize("wtype", GPU_FORMATS)
@pytest.mark.parametrize("rows", [1, 7, 33, 257])
@pytest.mark.parametrize("units", [1, 2, 3, 9, 40])
def test_gemv_quantized(device, rng, wtype, rows, units):
    """Raw ggml blocks straight into the kernel. Rows leave partial workgroups (4 rows each);
    k-quant rows of 256 .. 10,240 elements give a workgroup's 128 invocations (16 per block)
    less than one pass over a row, or several."""
    k = row_length(wtype, units)
    w_dev, w, _ = random_weights(device, rng, wtype, rows, k)
    x = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(w_dev, device.upload(x), y, wtype=wtype, x_rounding="float")  # test_gemv_integer_dot: int8 and int16
    np.testing.assert_allclose(y.numpy(), w @ x.astype(np.float64), rtol=1e-4, atol=1e-4 * np.abs(w).max() * np.sqrt(k))


def check_rounded_gemv(device, rng, wtype, rows, k, norm, rounding):
    """One GEMV with x rounded per block of 32 (x_rounding "int8" or "int16"): the result is
    W @ x_rounded up to fp32 sums. Checked against that product and against the exact W @ x
    within the rounding's bound: each element of x moves by at most half its block's step, so
    |y - W @ x| <= sum |W| * step / 2 per row."""
    w_dev, w, wtype = random_weights(device, rng, wtype, rows, k)
    x = (rng.standard_normal(k) * 2).astype(np.float32)
    x[:32] = 0.0  # a block of zeros: scale 0
    g = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(w_dev, device.upload(x), y, wtype=wtype, norm=device.upload(g) if norm else None, eps=1e-6,
             weight_offset=1.0, x_rounding=rounding)
    v = x * (g + np.float32(1.0)) if norm else x  # what the kernel rounds; 1 / rms scales the sums
    inv_rms = 1.0 / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-6) if norm else 1.0
    rounded, step = x_as_int_blocks(v, 8 if rounding == "int8" else 16)
    sums = 1e-4 * np.abs(w).max() * np.sqrt(k) * np.abs(v).max()  # fp32 accumulation
    # An element of x whose x / step lies within an ulp of a half may round the other way.
    tie = np.abs(w).max() * step.max()
    got = y.numpy()
    np.testing.assert_allclose(got, (w @ rounded) * inv_rms, rtol=1e-4, atol=(sums + tie) * inv_rms)
    bound = (np.abs(w) @ (step / 2) + sums) * inv_rms
    exact = (w @ v.astype(np.float64)) * inv_rms
    assert np.all(np.abs(got - exact) <= bound), np.max(np.abs(got - exact) / bound)


@pytest.mark.parametrize("wtype", ["Q8_0", "Q4_0", "Q4_1", *TILE_FORMATS])
@pytest.mark.parametrize("rows, k", [(1, 256), (7, 512), (33, 2048), (67, 4096 + 256), (5, 8192 + 512),
                                     (3, 16384 + 768)])
@pytest.mark.parametrize("norm", [False, True])
def test_gemv_integer_dot(device, rng, wtype, rows, k, norm):
    """The integer-dot path with x as int8 (rows of a multiple of 256 on devices with integer dot
    products; the tile-major forms in gemv_tiles.comp); k past 8192 (or a tile GEMV's slice)
    runs in several slices, each with its own table."""
    if not kernels.gemv_int_dot(device, wtype, k):
        pytest.skip("no integer-dot GEMV on this device")
    check_rounded_gemv(device, rng, wtype, rows, k, norm, "int8")


@pytest.mark.usefixtures("tile_gemv_units")
@pytest.mark.parametrize("wtype", TILE_FORMATS)
@pytest.mark.parametrize("rows, k", [(1, 32), (7, 96), (33, 1312), (67, 4096 + 96), (3, 9600), (4300, 1056)])
@pytest.mark.parametrize("norm", [False, True])
def test_gemv_int16(device, rng, wtype, rows, k, norm):
    """The engine's default for tiles on devices with integer dot products: x rounded to int16
    per block of 32, each code multiplied as its two bytes (gemv_tiles.comp X_BITS 16), for any
    k of whole blocks (one to 300; slices of 128). 4,300 rows are more tiles than an H200 has
    compute units, in rows shorter than 4,096: the shape kernels.cpp gives such GEMVs there (8
    invocations a row). The bound it is held to is 1/258 of int8's."""
    if not kernels.gemv_int16(device, wtype):
        pytest.skip("x as int16 is for tiles on Vulkan devices with integer dot products (the CPU backend's GEMV "
                    "rounds x to 16 bits its own way: test_gemv_tiles)")
    check_rounded_gemv(device, rng, wtype, rows, k, norm, "int16")


@pytest.mark.parametrize("wtype", ["Q8_0", "Q4_0", "Q4_1"])
@pytest.mark.parametrize("rows, k", [(1, 256), (7, 512), (33, 2048), (67, 4096 + 256), (5, 8192 + 512),
                                     (3, 16384 + 768)])
@pytest.mark.parametrize("norm", [False, True])
def test_gemv_words(device, rng, wtype, rows, k, norm):
    """The word GEMV, the float path of these rows on Vulkan devices (gemv_dot.comp with float
    entries): fp32 products against x as it is, so W @ x up to fp32 sums. Blocks that start
    inside a 32-bit word (Q8_0, Q4_0), Q4_1's minimums, several slices past 8192, the folded
    norm."""
    if not kernels.gemv_words(device, wtype, k):
        pytest.skip("the word GEMV is off here: the CPU backend has its own kernels, and CPU-type Vulkan devices "
                    "run it only with AKUNU_TUNE=gemv_words=1 (test_word_gemv_where_it_is_off_by_default does that)")
    w_dev, w, _ = random_weight_blocks_on(device, rng, wtype, rows, k)
    x = (rng.standard_normal(k) * 2).astype(np.float32)
    g = rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows, np.float32)
    ops.gemv(w_dev, device.upload(x), y, wtype=wtype, norm=device.upload(g) if norm else None, eps=1e-6,
             weight_offset=1.0, x_rounding="float")
    v = (x * (g + np.float32(1.0)) if norm else x).astype(np.float64)
    inv_rms = 1.0 / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-6) if norm else 1.0
    np.testing.assert_allclose(y.numpy(), (w @ v) * inv_rms, rtol=1e-4,
                               atol=1e-5 * np.abs(w).max() * np.sqrt(k) * np.abs(v).max() * inv_rms)


@pytest.mark.slow
def test_word_gemv_where_it_is_off_by_default(device, backend):
    """The word GEMV is opt-in (gemv.comp measured faster, on lavapipe and on an H200), so its
    kernel tests, and the decode logits of the Q8_0 fixtures, where it also folds the FFN
    activation into the down projection, run again in a process with AKUNU_TUNE=gemv_words=1, where
    every Q8_0/Q4_0/Q4_1 row of a multiple of 256 takes it."""
    if backend != "vulkan" or device.profile["gemv_words"] or not device.profile["subgroup_shuffle"]:
        pytest.skip("only for Vulkan devices that can run the word GEMV but do not by default")
    engine = str(pathlib.Path(__file__).with_name("test_engine.py"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-rs", "-p", "no:cacheprovider", __file__, engine,
                        "-k", "gemv or (logits_at_every_position and q8_0 and decode)"],
                       env={**os.environ, "AKUNU_TEST_BACKENDS": "vulkan", "AKUNU_TUNE": "gemv_words=1"},
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "word GEMV is off" not in r.stdout, r.stdout[-3000:]


def test_gemv_integer_dot_is_refused_where_it_is_not_taken(device):
    with pytest.raises(ValueError, match="no integer-dot path for Q4_0 rows of 96"):
        ops.gemv(device.allocate(18 * 3), device.empty([96], "f32"), device.empty([1], "f32"), wtype="Q4_0",
                 x_rounding="int8")
    with pytest.raises(ValueError, match="no int16 path for Q4_0"):
        ops.gemv(device.allocate(18 * 3), device.empty([96], "f32"), device.empty([1], "f32"), wtype="Q4_0",
                 x_rounding="int16")
    with pytest.raises(akunu.Error, match="x_rounding must be"):
        ops.gemv(device.allocate(18 * 3), device.empty([96], "f32"), device.empty([1], "f32"), wtype="Q4_0",
                 x_rounding="int4")


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("wtype", [np.float32, np.float16, "bf16"])
@pytest.mark.parametrize("rows, k", [(1, 96), (7, 4096 + 96), (70, 160)])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("norm", [False, True])
def test_gemv_gate_up(device, backend, rng, wtype, rows, k, activation, norm):
    """act(W_gate x) * (W_up x) from one dispatch (gemv.comp GATED), what a decode FFN of float
    weights runs instead of gate/up and an activation: odd row counts (a workgroup's last gate
    and up rows past the end), the FFN norm folded; y past the rows stays poisoned."""
    name = kernel_wtype(device, wtype)
    if backend == "cpu":
        assert not kernels.gemv_fuses_gate_up(device, name, k, activation)
        pytest.skip("the CPU backend runs gate and up as two GEMVs and the activation on its own")
    assert kernels.gemv_fuses_gate_up(device, name, k, activation), f"{name} rows of {k} should fuse on a Vulkan device"
    (wg_dev, wg, _), (wu_dev, wu, _) = (random_weights(device, rng, wtype, rows, k) for _ in range(2))
    x, g = rng.standard_normal(k).astype(np.float32), rng.standard_normal(k).astype(np.float32)
    y = poisoned(device, rows + 3, np.float32)
    x_dev, g_dev = device.upload(x), device.upload(g)
    ops._run(device, lambda cl: kernels.gemv_gate_up(cl, wg_dev, wu_dev, name, x_dev, y, rows, k, activation,
                                                     g_dev if norm else None, 1e-6, 1.0))
    xd = x.astype(np.float64)
    v = xd * (g.astype(np.float64) + 1.0) / np.sqrt(np.mean(xd ** 2) + 1e-6) if norm else xd
    gate, up = wg @ v, wu @ v
    act = gate / (1.0 + np.exp(-gate)) if activation == "silu" else \
        0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3)))
    scale = 1e-5 * max(np.abs(wg).max(), np.abs(wu).max()) * np.sqrt(k) * np.abs(v).max()
    got = y.numpy()
    # The products' fp32 error moves act(gate) by at most its slope (< 1.2) times it.
    bound = 1e-4 * np.abs(act * up) + scale * (1.2 * np.abs(up) + np.abs(act) + scale)
    assert np.all(np.abs(got[:rows] - act * up) <= bound), (got[:rows], act * up)
    assert np.isnan(got[rows:]).all(), "a row past the matrices' rows was written"


def test_gemv_gate_up_refuses_what_it_cannot_fuse(device, backend):
    if backend == "cpu":
        pytest.skip("the CPU backend fuses no gate/up")
    # Tiles fold the activation into the down projection instead.
    assert not kernels.gemv_fuses_gate_up(device, tiles_on(device, "Q4_0_T32"), 256)
    with pytest.raises(akunu.Error, match="activation must be 'silu' or 'gelu_tanh'"):
        kernels.gemv_fuses_gate_up(device, "F16", 256, "gelu")
    w, x, y = device.empty([4, 256], "f16"), device.empty([256], "f32"), device.empty([4], "f32")
    with pytest.raises(akunu.Error, match="no fused gate/up GEMV"):
        ops._run(device, lambda cl: kernels.gemv_gate_up(cl, w, w, tiles_on(device, "Q4_0_T32"), x, y, 4, 256))


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("wtype", [*TILE_FORMATS, np.float32, np.float16, "bf16"])
@pytest.mark.parametrize("rows, k", [((40, 24, 8), 96), ((4096 // 64, 32, 33), 4096 + 96), ((70, 70, 0), 160)])
@pytest.mark.parametrize("norm", [False, True])
def test_gemv_fused_parts(device, backend, rng, wtype, rows, k, norm):
    """Q, K and V (or gate and up: a third matrix of 0 rows) in one dispatch, for tiles
    (gemv_tiles.comp) and float weights (gemv.comp): matrices of their own row counts (partial
    last tiles and workgroups in each), each product in its own y, the norm folded; the float
    past each y's rows stays poisoned."""
    name = kernel_wtype(device, wtype)
    if backend == "cpu":
        pytest.skip("the CPU backend runs Q, K and V as three GEMVs (its threads split rows, not tiles)")
    assert kernels.gemv_fuses_parts(device, name, k), f"{name} rows of {k} should fuse on a Vulkan device"
    parts = [random_weights(device, rng, wtype, max(n, 1), k) for n in rows]
    x = rng.standard_normal(k).astype(np.float32)
    g = rng.standard_normal(k).astype(np.float32)
    x_dev, g_dev = device.upload(x), device.upload(g)
    xd = x.astype(np.float64)
    v = xd * (g.astype(np.float64) + 1.0) / np.sqrt(np.mean(xd ** 2) + 1e-6) if norm else xd
    # Tiles also as the engine runs them where it can: x rounded to int16 (test_gemv_int16's bound
    # is within twice these sums' allowance at these sizes).
    for rounding in ["float"] + (["int16"] if kernels.gemv_int16(device, name) else []):
        ys = [poisoned(device, n + 1, np.float32) for n in rows]
        ops._run(device, lambda cl: kernels.gemv_parts(cl, [p[0] for p in parts], name, x_dev, ys, rows, k,
                                                       g_dev if norm else None, 1e-6, 1.0, x_rounding=rounding))
        scale = 1e-5 if rounding == "float" else 2e-5
        for (_, w, _), n, y in zip(parts, rows, ys):
            got = y.numpy()
            np.testing.assert_allclose(got[:n], w[:n] @ v, rtol=1e-4,
                                       atol=scale * np.abs(w).max() * np.sqrt(k) * np.abs(v).max(), err_msg=rounding)
            assert np.isnan(got[n:]).all(), "a row past a matrix's rows was written"


# Adjacent RoPE pairs fold for tiles and float weights, half-split pairs for float weights only
# (test_gemv_parts_refuses_half_split_pairs_on_tiles).
FLOAT_WEIGHTS = [np.float32, np.float16, "bf16"]
ROPE_FOLDS = [(w, False) for w in [*TILE_FORMATS, *FLOAT_WEIGHTS]] + [(w, True) for w in FLOAT_WEIGHTS]


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("wtype, half_split", ROPE_FOLDS)
@pytest.mark.parametrize("heads, kv_heads, head_dim, pos, cache_rows, ring",
                         [(4, 2, 64, 5, 9, False), (3, 1, 48, 13, 6, True), (2, 2, 128, 0, 1, False),
                          (3, 1, 6, 2, 4, False)])
def test_gemv_parts_folds_rope_kv(device, backend, rng, wtype, heads, kv_heads, head_dim, pos, cache_rows, ring,
                                  half_split):
    """rope_kv folded into the Q/K/V dispatch of a decode step, for tiles (gemv_tiles.comp) and
    float weights (gemv.comp): Q and K rotated at step.pos on adjacent pairs (GGUF llama) or on
    (i, i + head_dim / 2) (HF checkpoints; float weights only, whose workgroups take the two
    rows of such a pair side by side), K and V also stored to the f16 cache row of pos (pos %
    rows in a ring: 13 % 6), every other cache row and every float past Q, K or V untouched.
    Head dims of 48 leave heads across tile boundaries; K and V of 48 rows end in a partial
    tile; a head of 6 rows ends in the middle of a workgroup of 4."""
    name = kernel_wtype(device, wtype)
    if backend == "cpu":
        assert not kernels.gemv_folds_rope_kv(device, name, ring, half_split)
        pytest.skip("the CPU backend runs Q, K and V as three GEMVs and rope_kv on its own")
    assert kernels.gemv_folds_rope_kv(device, name, ring, half_split)
    k = 96
    rows = (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)
    parts = [random_weights(device, rng, wtype, n, k) for n in rows]
    x = rng.standard_normal(k).astype(np.float32)
    g = rng.standard_normal(k).astype(np.float32)
    positions = max(pos + 1, 16)
    angles = rng.uniform(-np.pi, np.pi, (positions, head_dim // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    step = np.array([pos, 0, 1, 0], np.uint32)
    ys = [poisoned(device, n + 1, np.float32) for n in rows]
    caches = [poisoned(device, [kv_heads, cache_rows, head_dim], np.float16) for _ in range(2)]
    x_dev, g_dev, cos_dev, sin_dev, step_dev = (device.upload(a) for a in (x, g, cos, sin, step))
    ops._run(device, lambda cl: kernels.gemv_parts(
        cl, [p[0] for p in parts], name, x_dev, ys, rows, k, g_dev, 1e-6, 0.0, rope_cos=cos_dev, rope_sin=sin_dev,
        k_cache=caches[0], v_cache=caches[1], step=step_dev, head_dim=head_dim, cache_rows=cache_rows, ring=ring,
        positions=positions, half_split=half_split))
    xd = x.astype(np.float64)
    v = xd * g.astype(np.float64) / np.sqrt(np.mean(xd ** 2) + 1e-6)

    def rotate(y):  # pairs (2f, 2f + 1), or (f, f + head_dim / 2), of each head, at pos
        c, s = cos[pos].astype(np.float64), sin[pos].astype(np.float64)
        if half_split:
            y = y.reshape(-1, 2, head_dim // 2)
            return np.stack([y[:, 0] * c - y[:, 1] * s, y[:, 0] * s + y[:, 1] * c], 1).reshape(-1)
        y = y.reshape(-1, head_dim // 2, 2)
        return np.stack([y[..., 0] * c - y[..., 1] * s, y[..., 0] * s + y[..., 1] * c], -1).reshape(-1)

    want = [rotate(parts[0][1] @ v), rotate(parts[1][1] @ v), parts[2][1] @ v]
    for w_, n, y, (_, w, _) in zip(want, rows, ys, parts):
        got = y.numpy()
        np.testing.assert_allclose(got[:n], w_, rtol=1e-4, atol=1e-5 * np.abs(w).max() * np.sqrt(k) * np.abs(v).max())
        assert np.isnan(got[n:]).all(), "a float past a matrix's rows was written"
    slot = pos % cache_rows
    for cache, y, n in zip(caches, ys[1:], rows[1:]):
        got = cache.numpy()
        np.testing.assert_array_equal(got[:, slot, :].reshape(-1), y.numpy()[:n].astype(np.float16))
        others = np.delete(got, slot, axis=1)
        assert np.isnan(others).all(), "a cache row other than the step's was written"


@pytest.mark.parametrize("wtype", TILE_FORMATS)
def test_gemv_parts_refuses_half_split_pairs_on_tiles(device, rng, wtype):
    """A tile's rows are fixed by its layout, so tiles fold RoPE only on adjacent pairs: asked
    for pairs (i, i + head_dim / 2), gemv_folds_rope_kv says no and gemv_parts refuses with an
    error instead of rotating the wrong rows."""
    assert not kernels.gemv_folds_rope_kv(device, tiles_on(device, wtype), False, True)
    head_dim, k = 64, 96
    rows = (2 * head_dim, head_dim, head_dim)
    w = [random_weights(device, rng, wtype, n, k)[0] for n in rows]
    wtype = tiles_on(device, wtype)
    ys = [device.empty([n], "f32") for n in rows]
    tables = device.upload(np.zeros((16, head_dim // 2), np.float32))
    caches = [device.empty([1, 16, head_dim], "f16") for _ in range(2)]
    x, step = device.upload(np.ones(k, np.float32)), device.upload(np.zeros(4, np.uint32))
    # (The CPU backend refuses sooner: it fuses no Q/K/V GEMVs at all.)
    with pytest.raises(akunu.Error, match="adjacent pairs|no fused GEMV"):
        ops._run(device, lambda cl: kernels.gemv_parts(
            cl, w, wtype, x, ys, rows, k, rope_cos=tables, rope_sin=tables, k_cache=caches[0], v_cache=caches[1],
            step=step, head_dim=head_dim, cache_rows=16, positions=16, half_split=True))


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
    write them there) equals the same GEMM given X as f32, which rounds X to halves itself: bit
    for bit, over odd row counts and k past the 32-wide tile steps."""
    if not device.profile["gemm_coopmat"]:
        pytest.skip("the device has no cooperative matrices (lavapipe runs only the scalar GEMM, which takes f32 X)")
    w_dev, w, wname = random_weights(device, rng, wtype, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y32, y16 = poisoned(device, [m, n], np.float32), poisoned(device, [m, n], np.float32)
    ops.gemm(w_dev, device.upload(x), y32, wtype=wname, coopmat=True)
    ops.gemm(w_dev, device.upload(x.astype(np.float16)), y16, wtype=wname, coopmat=True)
    np.testing.assert_array_equal(y16.numpy(), y32.numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("m, n, k", [(97, 257, 1056), (130, 65, 40), (300, 1000, 520), (300, 2500, 1024),
                                     (256, 640, 512)])
def test_gemm_on_workgroup_cooperative_matrices(device, rng, m, n, k, accumulate):
    """gemm_cm2_f16 (VK_NV_cooperative_matrix2), which takes f16 W with X as halves past the
    short tiles' 96 rows, over row, output and k counts that leave partial tiles (128 or 64
    outputs x 128 rows) and k steps, and with k a multiple of the unrolled steps (1024, 512),
    where tiles inside both matrices take unclamped loads: against float64 NumPy on the same
    halves (f32 accumulation: 1e-4 of the sums' scale), Y poisoned first, or holding values it
    must add to."""
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
    more, and Q4_1's d * code + m, where a device does not fuse it in f16 (lavapipe), rounds the
    product first, an ulp of the row's largest weights."""
    if backend == "cpu":
        pytest.skip("the CPU backend's prefill reads block formats directly: it has no dequantizing kernel")
    k = row_length(wtype, units)
    w_dev, w, wname = random_weights(device, rng, wtype, rows, k)
    out = poisoned(device, [rows, k], np.float16)
    ops.dequant_f16(w_dev, out, wname)
    want = w.astype(np.float16).astype(np.float64)
    row_ulp = 2 ** -10 * np.abs(w).max(axis=1, keepdims=True) if wtype.startswith("Q4_1") else 2 ** -24
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


@pytest.mark.parametrize("wtype", ["Q3_K", "Q2_K", "Q5_0"])
def test_unsupported_weight_types_are_named_with_the_supported_ones(device, wtype):
    """Types akunu knows but no kernel reads: the error names the type and lists the others."""
    supported = ("F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, MLX4_G32, MLX4_G64, MLX4_G128, MLX8_G32, "
                 "MLX8_G64, MLX8_G128")
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
