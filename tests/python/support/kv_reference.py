"""The quantized KV formats, written out in NumPy from their definition (independent of akunu's
kernels and of akunu.dequantize_kv): per (head, position) row of head_dim values,

    q8    scale = max|row| / 127, codes round-half-even(x / scale) in [-127, 127]
    int4  scale = max|row| / 7,   codes round-half-even(x / scale) in [-8, 7]
    fp4   scale = max|row| / 6,   codes the nearest E2M1 value of x / scale (ties to the smaller
          magnitude): 0, 0.5, 1, 1.5, 2, 3, 4, 6 with a sign bit

with the scale rounded to f16 before the codes are formed. Packing: 32 / bits codes per u32
word, code j in bits [j * bits, (j + 1) * bits).

    int4h  int4 codes of H x, with H the orthonormal Sylvester-Hadamard matrix of the largest
           power of two (at most 256) dividing d, block-diagonal over the row; H = H^T = H^-1,
           so unrotate() takes a dequantized row back to x
    fp4h   fp4 codes of H x, as int4h"""
from __future__ import annotations

import numpy as np

QMAX = {"q8": 127.0, "int4": 7.0, "fp4": 6.0, "int4h": 7.0, "fp4h": 6.0}
BITS = {"q8": 8, "int4": 4, "fp4": 4, "int4h": 4, "fp4h": 4}
ROTATED = ("int4h", "fp4h")  # the formats of rotated rows, and the format of their codes: fmt[:-1]
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize(x: np.ndarray, fmt: str, scale: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(signed codes as values before scaling [..., d] float64, f16 scales [...]) of rows x[..., d];
    `scale` imposes the rows' f16 scales instead of forming them."""
    if fmt in ROTATED:
        return quantize(unrotate(x, fmt), fmt[:-1], scale)
    x = np.asarray(x, dtype=np.float32)
    if scale is None:
        scale = (np.abs(x).max(axis=-1) / np.float32(QMAX[fmt])).astype(np.float16)
    s32 = scale.astype(np.float32)
    inv = np.divide(np.float32(1), s32, out=np.zeros_like(s32), where=s32 > 0)
    y = x * inv[..., None]
    if fmt == "fp4":
        mag = np.abs(y)
        idx = sum((mag > t).astype(np.int64) for t in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0))
        codes = np.where(y < 0, -E2M1[idx], E2M1[idx])
    else:
        lo = -127.0 if fmt == "q8" else -8.0
        codes = np.clip(np.rint(y), lo, QMAX[fmt])
    return codes.astype(np.float64), scale


def hadamard(d: int) -> np.ndarray:
    """The int4h rotation of rows of d values: [d, d] float64, block-diagonal Sylvester blocks."""
    n = 1
    while n < 256 and d % (2 * n) == 0:
        n *= 2
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return np.kron(np.eye(d // n), h / np.sqrt(n))


def unrotate(x: np.ndarray, fmt: str) -> np.ndarray:
    """Rows x [..., d] of the format's rotated space back in the model's (int4h, fp4h; else x).
    The same matrix rotates into that space."""
    if fmt not in ROTATED:
        return x
    return np.asarray(x, dtype=np.float64) @ hadamard(x.shape[-1])


def dequantize(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return codes * scale.astype(np.float64)[..., None]


def unpack(words: np.ndarray, fmt: str) -> np.ndarray:
    """Signed code values [..., d] of packed u32 words [..., d * bits / 32]."""
    bits = BITS[fmt]
    out = []
    for j in range(32 // bits):
        c = (words.astype(np.int64) >> (j * bits)) & ((1 << bits) - 1)
        if fmt in ("fp4", "fp4h"):
            out.append(np.where(c & 8, -1.0, 1.0) * E2M1[c & 7])
        else:
            out.append(np.where(c >= 1 << (bits - 1), c - (1 << bits), c).astype(np.float64))
    return np.stack(out, axis=-1).reshape(*words.shape[:-1], -1)
