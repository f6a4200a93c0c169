"""The GEMV kernels against NumPy on odd sizes, outputs poisoned with NaN first: float rows,
block formats and their tile-major forms, folded norms and activations, norms handed forward,
x rounded to int8 or int16, fused projections and RoPE, and what each refuses."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu, ops
from akunu._akunu import kernels
from support.int8_x import x_as_int_blocks
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


@pytest.mark.usefixtures("float_gemv_shape")
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("wtype, rows, k", [(np.float32, 7, 37), (np.float16, 9, 1000), ("Q8_0", 33, 512),
                                            ("Q4_0", 5, 8192 + 512), ("Q4_1", 17, 2048), ("Q6_K", 3, 768)])
def test_gemv_with_a_folded_activation(device, rng, activation, wtype, rows, k):
    """The down projection reads act(gate) * up itself (x = gate, binding 3 = up): the same as
    the activation first, then the GEMV. Float rows (odd k takes the scalar path) and gemv.comp's
    block paths (the 32-element formats, k past 8192 included, and Q6_K)."""
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


@pytest.mark.parametrize("base, head, chunk", [("Q8_0", 2, 4), ("Q4_0", 2, 4), ("Q4_1", 4, 4), ("Q5_0", 2, 4),
                                               ("Q5_1", 4, 4), ("Q8_0", 2, 16), ("Q4_0", 2, 16), ("Q4_1", 4, 16)])
def test_tile_layout_bytes(rng, base, head, chunk):
    """Where pack_tiles puts each byte (formats/tiles.h, weights.glsl's w_tile_* addressing): in
    block column b of a tile, row r's head field f at 64 f + 2 r, then its codes in chunks of
    4 bytes (*_T32) or 16 (*_T32V), chunk c of row r at 32 * head + (32 c + r) * chunk (Q5's 4
    bytes of fifth bits are chunk 0). Rows past the matrix are zero."""
    rows, k, block = 37, 96, {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q5_1": 24}[base]
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
