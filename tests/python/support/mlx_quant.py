"""MLX affine quantization in NumPy, written from MLX's documented format (mx.quantize): per group
of G elements, scale = (max - min) / (2^bits - 1), bias = min, code = round((w - bias) / scale),
w ~ scale * code + bias; codes packed into uint32 words low bits first. Tests build MLX
checkpoints with it and dequantize with it, independently of akunu."""
from __future__ import annotations

import numpy as np


def quantize(w: np.ndarray, bits: int, group: int, scale_dtype=np.float16):
    """w [out, in] -> (codes U32 [out, in * bits / 32], scales, biases [out, in / group])."""
    out, inp = w.shape
    g = w.reshape(out, inp // group, group).astype(np.float64)
    lo, hi = g.min(axis=2), g.max(axis=2)
    scales = ((hi - lo) / (2**bits - 1)).astype(scale_dtype)
    biases = lo.astype(scale_dtype)
    s = np.where(scales == 0, 1, scales).astype(np.float64)[..., None]
    codes = np.clip(np.rint((g - biases.astype(np.float64)[..., None]) / s), 0, 2**bits - 1).astype(np.uint32)
    per_word = 32 // bits
    words = codes.reshape(out, inp // per_word, per_word) << (np.arange(per_word, dtype=np.uint32) * bits)
    return np.bitwise_or.reduce(words, axis=2).astype(np.uint32), scales, biases


def dequantize(codes: np.ndarray, scales: np.ndarray, biases: np.ndarray, bits: int) -> np.ndarray:
    """The float64 matrix MLX means by (codes, scales, biases)."""
    per_word = 32 // bits
    out = codes.shape[0]
    values = (codes[..., None] >> (np.arange(per_word, dtype=np.uint32) * bits)) & (2**bits - 1)
    values = values.reshape(out, -1).astype(np.float64)
    group = values.shape[1] // scales.shape[1]
    g = values.reshape(out, -1, group)
    return (g * scales.astype(np.float64)[..., None] + biases.astype(np.float64)[..., None]).reshape(out, -1)


def device_bytes(codes: np.ndarray, scales: np.ndarray, biases: np.ndarray) -> np.ndarray:
    """The weight buffer akunu's MLX kernels read: the codes, then (scale, bias) f32 per group."""
    pairs = np.stack([scales.astype(np.float32).reshape(-1), biases.astype(np.float32).reshape(-1)], axis=1)
    return np.concatenate([codes.reshape(-1).view(np.uint8), pairs.reshape(-1).view(np.uint8)])
