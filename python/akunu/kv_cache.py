"""akunu.KVCache: the KV cache of a batch's sequences as arrays with a batch dimension, read
from and written into the batch's block pool (docs/batch.md, "The KV cache as arrays").

    cache = akunu.KVCache(m, batch=4)            # a Batch of 4 empty sequences, and its cache
    cache = b.kv                                 # or the cache of Batch b's sequence slots
    cache.k(0)                                   # [batch, positions, n_kv_heads, head_dim]
    k, v = cache.update(seq, 0, k_new, v_new)    # rows [n, n_kv_heads, head_dim] at length .. length + n
    cache.advance(seq, n)                        # the sequence now holds those n positions
    cache.memory_usage()                         # bytes: the pool, its used blocks, each sequence's
    cache.batch.extend(seq, ids); cache.batch.step()   # run tokens on top of the rows written

k() and v() copy the rows out of the pool when called; update() writes into the pool's blocks
(taking them as a step would, copying a block shared with another sequence first), so the
batch's next step attends to what was written. Row b of the batch dimension is sequence id b
of the batch; a slot without a sequence has length 0.
"""
from __future__ import annotations

import numpy as np

from akunu._inputs import int_arg
from akunu.batch import Batch


class KVCache:
    """KV rows of up to `batch` sequences: KVCache(model, batch=N) makes a Batch of N empty
    sequences (prefix sharing off) and KVCache(batch_object) views an existing one's."""

    def __init__(self, model_or_batch, batch: int = 1):
        if isinstance(model_or_batch, Batch):
            self.batch = model_or_batch
        else:
            if not (isinstance(batch, int) and batch >= 1):
                raise ValueError(f"KVCache: batch must be an int >= 1, got {batch!r}")
            self.batch = Batch(model_or_batch, max_sequences=batch, prefix_sharing=False)
            for _ in range(batch):
                self.batch.add_empty()
        self._b = self.batch._b

    # ---- shape ---------------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Rows of the batch dimension: the batch's sequence slots."""
        return self._b.max_sequences

    @property
    def n_layers(self) -> int:
        return self._b.n_layers

    @property
    def n_kv_heads(self) -> int:
        return self._b.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self._b.head_dim

    @property
    def dtype(self) -> str:
        """The pool's format ("f16", "q8", ...); k() and v() of a quantized one are dequantized."""
        return self._b.kv_dtype

    @property
    def max_length(self) -> int:
        """Positions a sequence may hold (the model's context)."""
        return self._b.context

    def lengths(self) -> list[int]:
        """Positions each slot's sequence holds (0 for a slot without one)."""
        return [self._b.length(s) if self._b.active(s) else 0 for s in range(self.batch_size)]

    # ---- reading -------------------------------------------------------------------------------
    def k(self, layer: int) -> np.ndarray:
        """Keys of `layer`: [batch, max(lengths), n_kv_heads, head_dim], f16 (float32 dequantized
        in a quantized cache); the positions past a sequence's length are zeros."""
        return self._gather(layer, values=False)

    def v(self, layer: int) -> np.ndarray:
        """Values of `layer`, as k()."""
        return self._gather(layer, values=True)

    def _rows(self, seq: int, layer: int, values: bool) -> np.ndarray:
        """[length, n_kv_heads, head_dim] of one sequence."""
        view = self.batch.kv_cache(seq)
        side = view.v if values else view.k
        return side(layer, dequantize=self.dtype != "f16").transpose(1, 0, 2)

    def _gather(self, layer: int, values: bool) -> np.ndarray:
        self._check_layer(layer)
        lengths = self.lengths()
        dtype = np.float16 if self.dtype == "f16" else np.float32
        out = np.zeros((self.batch_size, max(lengths, default=0), self.n_kv_heads, self.head_dim), dtype)
        for seq, n in enumerate(lengths):
            if n:
                out[seq, :n] = self._rows(seq, layer, values)
        return out

    # ---- writing -------------------------------------------------------------------------------
    def update(self, seq: int, layer: int, k, v) -> tuple[np.ndarray, np.ndarray]:
        """Writes k and v ([n, n_kv_heads, head_dim], cast to f16) into `layer` of sequence
        `seq` at positions [length, length + n), which advance(seq, n) then counts as held.
        Returns the sequence's keys and values of the layer through the new rows,
        [length + n, n_kv_heads, head_dim] each. An f16 cache only."""
        self._check_layer(layer)
        start = self.batch.length(seq)
        rows = [self._checked_rows(x, name) for x, name in ((k, "k"), (v, "v"))]
        if rows[0].shape[0] != rows[1].shape[0]:
            raise ValueError(f"KVCache.update: k has {rows[0].shape[0]} rows and v {rows[1].shape[0]}")
        for values, x in enumerate(rows):  # the pool's rows are [n_kv_heads, n, head_dim], f16 bits
            bits = np.ascontiguousarray(x.transpose(1, 0, 2)).view(np.uint16)
            self._b.kv_write(seq, layer, bool(values), start, bits)
        held = [self._rows(seq, layer, bool(values)) for values in (0, 1)] if start else [x[:0] for x in rows]
        return tuple(np.concatenate([h, x]) for h, x in zip(held, rows))

    def _checked_rows(self, x, name: str) -> np.ndarray:
        with np.errstate(over="ignore"):  # a value past f16's range becomes infinity, refused below
            a = np.asarray(x, dtype=np.float16)
        want = (self.n_kv_heads, self.head_dim)
        if a.ndim != 3 or a.shape[1:] != want:
            raise ValueError(f"KVCache.update: {name} has shape {a.shape}; expected [n, {want[0]}, {want[1]}] "
                             "(rows, n_kv_heads, head_dim)")
        # A NaN or infinity (or a value past f16's range) would poison every later step of the sequence.
        bad = np.flatnonzero(~np.isfinite(a.reshape(len(a), -1)).all(axis=1))
        if bad.size:
            raise ValueError(f"KVCache.update: {name} row {int(bad[0])} is not finite in f16 (NaN, infinity or "
                             "past +-65504)")
        return a

    def advance(self, seq: int, n: int) -> None:
        """Counts n more positions as held by sequence `seq` (the rows update() wrote there);
        its next token runs at position length + n."""
        if not (isinstance(n, (int, np.integer)) and n >= 0):
            raise ValueError(f"KVCache.advance: n must be an int >= 0, got {n!r}")
        self._b.advance(int_arg(seq, "KVCache.advance: seq", lo=-(2**31)), int_arg(n, "KVCache.advance: n"))

    def _check_layer(self, layer: int) -> None:
        if not (isinstance(layer, (int, np.integer)) and 0 <= layer < self.n_layers):
            raise IndexError(f"KVCache: layer {layer!r} is out of range (0 to {self.n_layers - 1})")

    # ---- memory --------------------------------------------------------------------------------
    def memory_usage(self) -> dict:
        """Bytes: total (the pool, allocated once), used (its blocks that sequences hold, each
        shared block once), per_sequence (each slot's blocks, shared ones counted in each) and
        block (one block of 256 positions of every layer's K and V)."""
        r = self.batch.memory_report()
        per = [len(self._b.block_table(s)) * r["block_bytes"] if self._b.active(s) else 0
               for s in range(self.batch_size)]
        return {"total": r["kv_bytes"], "used": r["blocks_used"] * r["block_bytes"], "per_sequence": per,
                "block": r["block_bytes"]}

    def __repr__(self) -> str:
        return (f"KVCache(batch={self.batch_size}, layers={self.n_layers}, kv_heads={self.n_kv_heads}, "
                f"head_dim={self.head_dim}, dtype={self.dtype}, lengths={self.lengths()})")
