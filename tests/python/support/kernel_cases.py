"""What the kernel tests share: a device per backend and tuning, the GEMV shape fixtures that
tune it, poisoned outputs, and random weights in every format the kernels read."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu
from akunu._akunu import kernels
from support.ggml_blocks import BLOCK_FORMATS, random_blocks

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


GPU_FORMATS = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


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


def gated_reference(x, up, activation):
    """act(x) * up in float64, from the formulas of SiLU and GELU's tanh approximation."""
    x, up = x.astype(np.float64), up.astype(np.float64)
    if activation == "silu":
        return x / (1.0 + np.exp(-x)) * up
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))) * up
