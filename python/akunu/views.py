"""Views of a model's KV cache and scratch buffers as NumPy arrays, and the dequantization of
a quantized KV cache's packed rows (docs/kv-cache.md)."""
from __future__ import annotations

import numpy as np

from akunu._inputs import int_arg

# E2M1 values of the 16 fp4 codes: sign bit 3, exponent bits 2-1, mantissa bit 0.
_FP4_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def hadamard_block(head_dim: int) -> int:
    """The power-of-two block int4h and fp4h rotate over: the largest dividing head_dim, at most
    256."""
    block = 1
    while block < 256 and head_dim % (block * 2) == 0:
        block *= 2
    return block


def hadamard_rotate(x: np.ndarray) -> np.ndarray:
    """x [..., head_dim] times the orthonormal Walsh-Hadamard matrix of hadamard_block(head_dim),
    block-diagonal over the last axis: int4h's and fp4h's rotation, its own inverse (kv_format.h)."""
    head_dim = x.shape[-1]
    n = hadamard_block(head_dim)
    i = np.arange(n)
    bits = np.bitwise_and(i[:, None], i[None, :])
    parity = np.zeros_like(bits)
    while bits.any():
        parity ^= bits & 1
        bits >>= 1
    h = (1 - 2 * parity).astype(np.float32) / np.float32(np.sqrt(n))
    blocks = np.asarray(x, dtype=np.float32).reshape(*x.shape[:-1], head_dim // n, n)
    return (blocks @ h).reshape(x.shape)


def dequantize_kv(words: np.ndarray, scales: np.ndarray, kv_dtype: str) -> np.ndarray:
    """float32 [..., head_dim] from a quantized cache's packed words [..., head_dim * bits / 32]
    (u32, value j of a word in bits [j * bits, (j + 1) * bits)) and row scales [...] (f16):
    code * scale, with int8 codes for q8, int4 codes in [-8, 7] for int4 and int4h and E2M1
    codes for fp4 and fp4h (see shaders/include/kv_format.glsl); int4h and fp4h rows are then
    rotated back (hadamard_rotate)."""
    if kv_dtype in ("int4h", "fp4h"):
        return hadamard_rotate(dequantize_kv(words, scales, kv_dtype[:-1]))
    if kv_dtype not in ("q8", "int4", "fp4"):
        raise ValueError(f"kv_dtype {kv_dtype!r} is not a quantized format (q8, int4, fp4, int4h, fp4h)")
    bits = 8 if kv_dtype == "q8" else 4
    shifts = np.arange(32 // bits, dtype=np.uint32) * bits
    codes = (np.asarray(words, dtype=np.uint32)[..., None] >> shifts) & ((1 << bits) - 1)
    codes = codes.reshape(*words.shape[:-1], words.shape[-1] * (32 // bits))  # an empty cache too
    if kv_dtype == "fp4":
        values = _FP4_VALUES[codes]
    else:
        signed = codes.astype(np.int32)
        values = (signed - ((signed >> (bits - 1)) << bits)).astype(np.float32)
    return values * np.asarray(scales, dtype=np.float32)[..., None]


class KVCacheView:
    """The model's KV cache, as stored: for kv_dtype f16, k(layer)/v(layer) are
    [n_kv_heads, current_length, head_dim] f16 views; for q8/int4/fp4/int4h/fp4h they are the
    packed codes, u32 [n_kv_heads, current_length, head_dim * bits / 32], with k_scales/v_scales
    the f16 row scales [n_kv_heads, current_length] ("q8/int4" and "q8/fp4": keys in q8, values in
    the 4-bit format; int4h, fp4h: int4 or fp4 codes of Hadamard-rotated rows). k(layer,
    dequantize=True) gives float32 values in every format, int4h's and fp4h's rotated back.
    Views are copies where the device memory is not host-visible; copy=True asks for one anyway,
    read through the staging area: on a discrete GPU the views are device memory the host maps
    uncached, which NumPy reads a few bytes per bus round trip (bench/NOTES.md measures it),
    where a copy goes at the bus's speed. dequantize=True reads that way.

    Layers kept in blocks (kv_alloc="blocks") or in a sliding-window ring (kv_ring=True) are
    not one buffer: their k/v/k_scales/v_scales are copies of rows [0, current_length) gathered
    in position order (a ring's rows older than sliding_from are overwritten: zeros there).
    layers names each layer's layout: "full", "blocks" or "ring"."""

    def __init__(self, engine):
        self._e = engine

    @property
    def dtype(self) -> str:
        """The storage format: "f16", "q8", "int4", "fp4", "q8/int4", "q8/fp4" (keys/values),
        "int4h" or "fp4h" (Hadamard-rotated int4 or fp4)."""
        return self._e.kv_dtype

    def side_dtype(self, values: bool) -> str:
        """The format of the keys (values=False) or of the values (as the cache stores them; a
        recent window's f16 copies are recent_k/recent_v)."""
        sides = self.dtype.split("+")[0].split("/")
        return sides[-1] if values else sides[0]

    @property
    def recent(self) -> int:
        """The recent window: positions each query reads in f16 ("<format>+w<n>"; 0: none)."""
        _, _, window = self.dtype.partition("+w")
        return int(window) if window else 0

    def recent_k(self, layer: int) -> np.ndarray:
        """The recent window's ring of keys of `layer`: f16 [n_kv_heads, ring rows, head_dim],
        position t in row t % ring rows (rotated for int4h and fp4h, as the cache's rows)."""
        return self._e.kv_recent_view(layer, False)

    def recent_v(self, layer: int) -> np.ndarray:
        """The recent window's ring of values of `layer`, as recent_k."""
        return self._e.kv_recent_view(layer, True)

    @property
    def layers(self) -> list[str]:
        """Each layer's layout: "full" (pre-allocated), "blocks" (grown 256 positions at a time)
        or "ring" (a sliding-window layer's ring, kv_ring=True)."""
        return list(self._e.kv_layers)

    @property
    def sliding_from(self) -> int:
        """The first position whose rows the rings still hold (0 without rings): truncate() can
        rewind to lengths from sliding_from + window - 1 on (or to 0)."""
        return self._e.kv_sliding_from

    @property
    def current_length(self) -> int:
        """Positions that hold valid K/V rows."""
        return self._e.kv_length

    @property
    def max_length(self) -> int:
        """Positions the cache was allocated for (the model's context)."""
        return self._e.context

    def k(self, layer: int, dequantize: bool = False, copy: bool = False) -> np.ndarray:
        """Keys of `layer` as stored ([n_kv_heads, current_length, head_dim] f16, or packed u32
        codes), or with dequantize float32 [n_kv_heads, current_length, head_dim]; copy: an array
        of their own, read through the staging area (the class says why)."""
        return self._side(layer, False, dequantize, copy)

    def v(self, layer: int, dequantize: bool = False, copy: bool = False) -> np.ndarray:
        """Values of `layer`, as k()."""
        return self._side(layer, True, dequantize, copy)

    def k_scales(self, layer: int, copy: bool = False) -> np.ndarray:
        """Row scales of a quantized cache's keys: f16 [n_kv_heads, current_length]."""
        return self._e.kv_view(layer, False, True, copy)[:, : self.current_length]

    def v_scales(self, layer: int, copy: bool = False) -> np.ndarray:
        """Row scales of a quantized cache's values: f16 [n_kv_heads, current_length]."""
        return self._e.kv_view(layer, True, True, copy)[:, : self.current_length]

    def _side(self, layer: int, values: bool, dequantize: bool, copy: bool) -> np.ndarray:
        stored = self._e.kv_view(layer, values, False, copy or dequantize)[:, : self.current_length, :]
        if not dequantize:
            return stored
        if self.side_dtype(values) == "f16":
            return stored.astype(np.float32)
        scales = self.v_scales(layer, copy=True) if values else self.k_scales(layer, copy=True)
        return dequantize_kv(stored, scales, self.side_dtype(values))

    def reset(self) -> None:
        """Empties the cache (nothing is freed or cleared; the length goes to 0)."""
        self._e.reset()

    def truncate(self, n: int) -> None:
        """Rewinds to the first n positions; n past the current length, or (with rings) before
        what the window of position n needs, raises akunu.Error saying how far one can rewind."""
        self._e.truncate(int_arg(n, "truncate: n", lo=-(2**31)))  # the engine says why a negative n is out


class ScratchView:
    """The named scratch buffers (h0, h1, residual, qkv, attn_out, ffn_*, logits, ...) as views:
    scratch["h0"]. On a discrete GPU a view is device memory the host maps uncached, which NumPy
    reads a few bytes per bus round trip (bench/NOTES.md): scratch.read("h0") is a copy read
    through the staging area instead."""

    def __init__(self, engine):
        self._e = engine

    def names(self) -> list[str]:
        """The scratch buffer names, for indexing."""
        return list(self._e.scratch_names)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._e.scratch_view(name)

    def read(self, name: str) -> np.ndarray:
        """A copy of the named buffer, read through the staging area where the device maps its
        memory uncached (the same values as scratch[name] holds now)."""
        return self._e.scratch_view(name, True)

    def __repr__(self) -> str:
        return f"ScratchView({', '.join(self.names())})"
