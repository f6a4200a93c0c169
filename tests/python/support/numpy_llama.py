"""An independent float64 forward pass of a llama-architecture GGUF file, in NumPy.

Weights are read and dequantized by gguf-py (llama.cpp's own Python package), not by akunu,
so the comparison checks akunu's reader, dequantizers and kernels together. GGUF llama files
hold Q and K rows permuted for interleaved RoPE: pairs (2i, 2i+1) rotate together.
"""
from __future__ import annotations

import numpy as np


class NumpyLlama:
    def __init__(self, path: str):
        import gguf

        r = gguf.GGUFReader(path)
        self.meta = {f.name: f.contents() for f in r.fields.values() if not f.name.startswith("tokenizer.")}
        arch = self.meta["general.architecture"]
        assert arch == "llama", arch
        g = lambda k, d=None: self.meta.get(f"llama.{k}", d)  # noqa: E731
        self.n_layers, self.dim = int(g("block_count")), int(g("embedding_length"))
        self.n_heads = int(g("attention.head_count"))
        self.n_kv = int(g("attention.head_count_kv", self.n_heads))
        self.head_dim = int(g("attention.key_length", self.dim // self.n_heads))
        self.eps = float(g("attention.layer_norm_rms_epsilon", 1e-6))  # absent: transformers' default, as akunu
        self.theta = float(g("rope.freq_base", 10000.0))
        self.w, self.types = {}, {}
        for t in r.tensors:
            shape = tuple(int(d) for d in reversed(t.shape))
            self.w[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
            self.types[t.name] = t.tensor_type.name
        self.output_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        self.output = self.w[self.output_name]

    def _rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _rope(self, x, positions):  # x [T, heads, head_dim], interleaved pairs
        half = self.head_dim // 2
        inv = 1.0 / self.theta ** (np.arange(half) * 2.0 / self.head_dim)
        ang = positions[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = a * s + b * c
        return out

    def logits(self, ids: list[int], kv_hook=None, x_rounding=None, recent: int = 0) -> np.ndarray:
        """[len(ids), vocab] logits of a causal forward pass over `ids` (kv_hook, x_rounding:
        see forward)."""
        return self.forward(ids, kv_hook, x_rounding, recent)[0]

    def forward(self, ids: list[int], kv_hook=None, x_rounding=None,
                recent: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
        """The logits and the residual stream after each layer ([len(ids), dim] each, the last
        one before the output norm) of a causal forward pass over `ids`. With `kv_hook`, each
        layer's attention uses kv_hook(layer, k, v) -> (k, v) in place of its K and V
        ([T, n_kv, head_dim], after RoPE): a hook to read them, or to put another cache's
        contents in their place. With `x_rounding`, each projection multiplies
        x_rounding(x, weight name) in place of its input x [T, k]: the rounding of the
        activations that an engine applies before some matrix products. With `recent` (a KV
        format's recent window, kv_format.h), query i reads the keys and values j > i - recent
        as the layer computed them rounded to f16, and only older ones through kv_hook."""
        def proj(x, name):
            return (x if x_rounding is None else x_rounding(x, name)) @ self.w[name].T

        T = len(ids)
        residuals = []
        pos = np.arange(T, dtype=np.float64)
        x = self.w["token_embd.weight"][ids]
        group = self.n_heads // self.n_kv
        mask = np.triu(np.full((T, T), -np.inf), 1)
        ages = np.arange(T)[:, None] - np.arange(T)[None, :]
        near = (ages >= 0) & (ages < recent)  # [query, key]: read from the f16 copy
        for layer in range(self.n_layers):
            p = f"blk.{layer}."
            h = self._rms(x, self.w[p + "attn_norm.weight"])
            q = proj(h, p + "attn_q.weight").reshape(T, self.n_heads, self.head_dim)
            k = proj(h, p + "attn_k.weight").reshape(T, self.n_kv, self.head_dim)
            v = proj(h, p + "attn_v.weight").reshape(T, self.n_kv, self.head_dim)
            q, k = self._rope(q, pos), self._rope(k, pos)
            k16, v16 = (a.astype(np.float16).astype(np.float64) for a in (k, v))
            if kv_hook is not None:
                k, v = kv_hook(layer, k, v)
            out = np.empty_like(q)
            for hh in range(self.n_heads):
                kv = hh // group
                s = np.where(near, q[:, hh] @ k16[:, kv].T, q[:, hh] @ k[:, kv].T) / np.sqrt(self.head_dim) + mask
                s = np.exp(s - s.max(axis=1, keepdims=True))
                p_ = s / s.sum(axis=1, keepdims=True)
                out[:, hh] = np.where(near, p_, 0) @ v16[:, kv] + np.where(near, 0, p_) @ v[:, kv]
            x = x + proj(out.reshape(T, -1), p + "attn_output.weight")
            h = self._rms(x, self.w[p + "ffn_norm.weight"])
            gate, up = proj(h, p + "ffn_gate.weight"), proj(h, p + "ffn_up.weight")
            x = x + proj(gate / (1 + np.exp(-gate)) * up, p + "ffn_down.weight")
            residuals.append(x)
        return proj(self._rms(x, self.w["output_norm.weight"]), self.output_name), residuals
