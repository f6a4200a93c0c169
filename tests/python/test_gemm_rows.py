"""gemm_rows.comp: the GEMM of tile-major Q8_0/Q4_0/Q4_1 weights at few rows (a batched decode
step, a short prompt) as the tile GEMV of several rows of x. Against float64 NumPy on the same
weights and on x rounded as the kernel holds it, over odd row, output and k counts, row groups
past the first, outputs poisoned with NaN first."""
from __future__ import annotations

import numpy as np
import pytest

from akunu import ops
from akunu._akunu import kernels
from support.int8_x import x_as_int_blocks
from support.kernel_cases import TILE_FORMATS, _device, poisoned, random_weights

ROWS = 64  # the rows this file's device takes the kernel up to (the engine's default is fewer)


@pytest.fixture(params=["geometry of the device", "1,024 invocations"])
def device(backend, request):
    """A device that runs GEMMs of up to ROWS rows of tile weights in the kernel, so that row
    groups past the first are covered too; in the device's geometry, and in the one GPUs take
    at 3 and 4 rows of rounded x (rows split over 32 invocations of one unit, the widest slice
    of x that fits: kernels_gemv.cpp gemv_tiles_shape)."""
    shape = ",gemm_rows=32:1:1024" if request.param == "1,024 invocations" else ""
    return _device(backend, f"gemm_tile_rows={ROWS}{shape}")


def tile_rows_on(device, wtype):
    rows = kernels.gemm_tile_rows(device, kernels.tile_type(device, wtype[:-4]))
    if rows == 0:
        pytest.skip("the CPU backend multiplies tile weights in its own GEMM (gemm_tile_rows is 0 there)")
    return rows


def check_rows_gemm(device, rng, wtype, m, n, k, *, accumulate=False, half_x=False):
    """One GEMM at m rows: Y = X_held @ W.T up to fp32 sums, X_held being X rounded per block of
    32 to int16 where the kernel rounds it (X as halves: as the GEMVs round x,
    kernels.gemv_x_rounding; f32 X: not at all), within the rounding's bound of the exact
    product either way."""
    w_dev, w, wname = random_weights(device, rng, wtype, n, k)
    x = (rng.standard_normal((m, k)) * 2).astype(np.float32)
    x[0, :32] = 0.0  # a block of zeros: scale 0
    if half_x:
        x = x.astype(np.float16).astype(np.float32)
    rounding = kernels.gemv_x_rounding(device, wname, k, kernels.engine_x_rounding(device)) if half_x else "float"
    held, step = x.astype(np.float64), np.zeros_like(x, dtype=np.float64)
    if rounding != "float":
        pairs = [x_as_int_blocks(row, 8 if rounding == "int8" else 16) for row in x]
        held, step = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    y0 = rng.standard_normal((m, n)).astype(np.float32) if accumulate else np.full((m, n), np.nan, np.float32)
    y = device.upload(y0)
    ops.gemm(w_dev, device.upload(x.astype(np.float16) if half_x else x), y, wtype=wname, accumulate=accumulate)
    base = y0.astype(np.float64) if accumulate else 0.0
    sums = 1e-4 * np.abs(w).max() * np.sqrt(k) * np.abs(x).max()  # fp32 accumulation
    tie = np.abs(w).max() * step.max()  # x / step within an ulp of a half may round the other way
    got = y.numpy()
    np.testing.assert_allclose(got, base + held @ w.T, rtol=1e-4, atol=sums + tie)
    bound = step / 2 @ np.abs(w).T + sums
    assert np.all(np.abs(got - (base + x.astype(np.float64) @ w.T)) <= bound + 1e-4 * np.abs(base))


@pytest.mark.parametrize("wtype", TILE_FORMATS)
@pytest.mark.parametrize("m, n, units", [(1, 7, 1), (2, 33, 5), (5, 300, 9), (16, 64, 40), (17, 70, 3), (37, 257, 2),
                                         (64, 95, 7)])
def test_gemm_of_few_rows_of_tiles(device, rng, wtype, m, n, units):
    """Rows 1 to 64 (one to four groups of 16), outputs that leave a part tile, k of 1 to 40
    blocks (several staging slices at 40)."""
    assert m <= tile_rows_on(device, wtype)
    check_rows_gemm(device, rng, wtype, m, n, 32 * units)


@pytest.mark.parametrize("wtype", TILE_FORMATS)
def test_gemm_of_few_rows_adds_into_y(device, rng, wtype):
    tile_rows_on(device, wtype)
    check_rows_gemm(device, rng, wtype, 19, 45, 96, accumulate=True)


@pytest.mark.gpu
@pytest.mark.parametrize("wtype", TILE_FORMATS)
def test_gemm_of_few_rows_reads_x_as_halves(device, rng, wtype):
    """A batched step's norms write X as halves where the GEMMs take them (gemm_takes_half_x):
    the kernel reads them as such."""
    tile_rows_on(device, wtype)
    if not device.profile["gemm_coopmat"]:
        pytest.skip("X as halves is for cooperative-matrix devices (lavapipe's GEMMs take f32 X)")
    check_rows_gemm(device, rng, wtype, 21, 130, 256, half_x=True)


@pytest.mark.parametrize("wtype", ["Q4_0_T32"])
def test_gemm_of_few_rows_keeps_to_its_row_window(device, rng, wtype):
    """Recorded with a row window, the dispatch runs only for steps inside it."""
    tile_rows_on(device, wtype)
    m, n, k = 9, 40, 64
    w_dev, _, wname = random_weights(device, rng, wtype, n, k)
    x = device.upload(rng.standard_normal((m, k)).astype(np.float32))
    for lo, hi, runs in [(m + 1, 0, False), (0, m, False), (m, m + 1, True)]:
        y = poisoned(device, [m, n], np.float32)
        ops.gemm(w_dev, x, y, wtype=wname, min_rows=lo, max_rows=hi)
        assert np.isnan(y.numpy()).all() != runs, f"window [{lo}, {hi}) at {m} rows"
