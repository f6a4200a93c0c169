"""The rounding of x that the integer-dot GEMVs apply (int8 with AKUNU_INT8=1: gemv_dot.comp's
Q8_0, Q4_0 and Q4_1 rows of a multiple of 256 elements and their tiles; int16 by default:
gemv_tiles.comp's tiles; both on devices with integer dot products), for the tests that hold
the engine to float references: its exact emulation, and the allowances int8 needs."""
from __future__ import annotations

import os

import numpy as np

import akunu
from akunu._akunu import kernels


def x_as_int_blocks(x: np.ndarray, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """x (1-D) as the integer-dot GEMV multiplies it, and each element's rounding step: every
    block of 32 rounded to `bits` (8: the scale max|x| / 127, ggml's q8_1 without the sum; 16:
    max|x| / 32767, the engine's default on tiles), half to even, in float32 as the kernel
    rounds it. Both float64."""
    top = np.float32(127 if bits == 8 else 32767)
    xb = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(xb).max(axis=1, keepdims=True)
    inv = np.divide(top, amax, out=np.zeros_like(amax), where=amax > 0)
    step = amax / top
    rounded = np.rint(xb * inv) * step
    return rounded.reshape(-1).astype(np.float64), np.broadcast_to(step, xb.shape).reshape(-1).astype(np.float64)


def decode_x_rounding(backend: str, ref):
    """For NumpyLlama(x_rounding=...): the rounding of the inputs of the engine's decode GEMVs
    on `backend` (x_as_int_blocks for the weights that take the integer-dot path there)."""
    device = akunu.Device(backend)

    def rounding(x, name):
        if not (device.profile["int8_activations"] and kernels.gemv_int_dot(device, ref.types[name], x.shape[-1])):
            return x
        return np.stack([x_as_int_blocks(row, 8)[0] for row in x])
    return rounding


# Where the decode GEMVs of Q8_0 weights round x to int8 per block of 32 (AKUNU_INT8=1 on a device
# with integer dot products, kernels.gemv_int_dot; llama.cpp's GPU backends round the
# same way), decode logits move further from the float references, for which the fixture
# README suggests ~0.1 more. Measured (max / mean |dlogit| against logits_q8_0): the random
# models 0.07-0.16 / 0.010-0.023, the trained model 0.52 / 0.058, which a float64 NumPy forward
# with the same rounding reproduces (0.42 / 0.042 from its float64 logits). Allowed on top of
# the float thresholds, max and mean:
INT8_X_ALLOWANCE = {"trained-code-llama": (0.6, 0.08)}
INT8_X_ALLOWANCE_RANDOM = (0.2, 0.025)


def decode_rounds_x(m, source: str) -> bool:
    """Whether m's decode GEMVs round x to int8: a Q8_0 GGUF (`source`) on the device of the
    running backend (AKUNU_DEVICE) where that takes the integer-dot path."""
    device = akunu.Device(os.environ.get("AKUNU_DEVICE", ""))
    return ("q8_0" in source and device.profile["int8_activations"]
            and kernels.gemv_int_dot(device, "Q8_0", m.config.dim))
