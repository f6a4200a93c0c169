"""Predicts what a KV-cache format would cost before it is written: a NumPy forward pass of the
trained code model of the reference fixtures (its HF safetensors, bf16) whose attention reads
K and V through a quantize-dequantize function, scored like `akunu kv-quality` (the standard
library corpus, windows of 512 from an empty cache): perplexity against f16 and the mean
KL(f16 || format). bench/NOTES.md compares these predictions with what akunu measured.

    python bench/kv_format_sim.py --tokens 2048 int4 int4h int4h/f16 asym4g32h/asym4h
    python bench/kv_format_sim.py --recent 16 int4h     # the 16 latest keys of each query exact

A format is KEYS[/VALUES]: BASE[gN][h], BASE one of f16, q8, int4 (scale max/7), fp4 (E2M1),
asym4 (16 levels between the row's min and max, an f16 scale and minimum); gN: a scale per N
values instead of per row; h: rows multiplied by the head's Walsh-Hadamard matrix first (int4h).
Keys are quantized in the GGUF (interleaved-pair) order akunu's cache holds them in.
"""
import argparse
import json
import math
import os
import pathlib
import sysconfig

import numpy as np

FIXTURES = os.environ.get("AKUNU_FIXTURES") or pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures"
FIXTURE = pathlib.Path(FIXTURES) / "trained-code-llama"
L, NH, NKV, HD = 6, 4, 2, 64
PERM = np.array([j for i in range(HD // 2) for j in (i, i + HD // 2)])  # HF order -> GGUF order
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def load_safetensors(path):
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    out = {}
    for name, t in json.loads(raw[8:8 + n]).items():
        if name != "__metadata__":
            a, b = t["data_offsets"]
            bits = np.frombuffer(raw[8 + n + a: 8 + n + b], np.uint16).astype(np.uint32) << 16
            out[name] = bits.view(np.float32).reshape(t["shape"])
    return out


def f16(x):
    return x.astype(np.float16).astype(np.float32)


def grouped(fn, g):
    return lambda x: fn(x.reshape(*x.shape[:-1], -1, g)).reshape(x.shape)


def symmetric(qmax, lo):
    def q(s):
        sc = f16(np.abs(s).max(-1, keepdims=True) / qmax)
        return np.clip(np.round(s / np.where(sc == 0, 1, sc)), lo, qmax) * sc
    return q


def fp4(s):
    sc = f16(np.abs(s).max(-1, keepdims=True) / 6)
    y = np.abs(s / np.where(sc == 0, 1, sc))
    return np.sign(s) * E2M1[(y[..., None] > np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])).sum(-1)] * sc


def asym4(s):
    mn, mx = s.min(-1, keepdims=True), s.max(-1, keepdims=True)
    sc, mn = f16((mx - mn) / 15), f16(mn)
    return np.clip(np.round((s - mn) / np.where(sc == 0, 1, sc)), 0, 15) * sc + mn


def hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / math.sqrt(n)


def side(name):
    """Quantize-dequantize of rows [..., HD] in format `name` (module docstring)."""
    rotate = name.endswith("h")
    name = name.rstrip("h") if rotate else name
    base, _, g = name.partition("g")
    fn = {"f16": f16, "q8": symmetric(127, -127), "int4": symmetric(7, -8), "fp4": fp4, "asym4": asym4}[base]
    fn = grouped(fn, int(g) if g else HD)
    if not rotate:
        return fn
    h = hadamard(HD)
    return lambda x: fn(x @ h) @ h


class Model:
    def __init__(self, path):
        self.w = load_safetensors(path)

    def rms(self, x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * self.w[name]

    def log_probs(self, ids, kq, vq, recent=0):
        t, w = len(ids), self.w
        inv = 1.0 / (10000.0 ** (np.arange(0, HD, 2) / HD))
        ang = np.arange(t)[:, None] * inv[None, :]
        cos, sin = np.concatenate([np.cos(ang)] * 2, -1), np.concatenate([np.sin(ang)] * 2, -1)
        rope = lambda x: x * cos + np.concatenate([-x[..., HD // 2:], x[..., :HD // 2]], -1) * sin  # noqa: E731
        causal = np.triu(np.full((t, t), -np.inf, np.float32), 1)
        exact = np.arange(t)[:, None] - np.arange(t)[None, :] < recent  # keys a query reads unquantized
        x = w["model.embed_tokens.weight"][ids]
        for i in range(L):
            p = f"model.layers.{i}."
            h = self.rms(x, p + "input_layernorm.weight")
            q, k, v = ((h @ w[p + f"self_attn.{m}_proj.weight"].T).reshape(t, n, HD).transpose(1, 0, 2)
                       for m, n in (("q", NH), ("k", NKV), ("v", NKV)))
            q, k = rope(q).astype(np.float32), rope(k).astype(np.float32)
            kd, vd = kq(k[..., PERM])[..., np.argsort(PERM)], vq(v)
            rep = lambda a: np.repeat(a, NH // NKV, 0)  # noqa: E731
            s = np.where(exact, q @ rep(k).transpose(0, 2, 1), q @ rep(kd).transpose(0, 2, 1)) / math.sqrt(HD)
            s = np.exp(s + causal - (s + causal).max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = (s * exact) @ rep(v) + (s * ~exact) @ rep(vd)
            x = x + o.transpose(1, 0, 2).reshape(t, NH * HD) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, p + "post_attention_layernorm.weight")
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        lg = (self.rms(x, "model.norm.weight") @ w["model.embed_tokens.weight"].T).astype(np.float64)
        lg -= lg.max(1, keepdims=True)
        return lg - np.log(np.exp(lg).sum(1, keepdims=True))


def corpus(n_tokens):
    import akunu
    from akunu import kv_quality
    tok = akunu.Tokenizer.from_file(str(FIXTURE / "gguf" / "trained-code-llama-q8_0.gguf"))
    return kv_quality.python_corpus(tok, n_tokens, tok.bos_id, tok.eos_id)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("formats", nargs="+")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--recent", type=int, default=0, help="latest keys of each query read unquantized")
    args = ap.parse_args()
    model, ids = Model(FIXTURE / "hf" / "model.safetensors"), np.asarray(corpus(args.tokens))
    nll = {f: [] for f in ["f16", *args.formats]}
    kl = {f: [] for f in args.formats}
    for at in range(0, len(ids) - 1, 512):
        chunk = ids[at: at + 513]
        targets = np.arange(len(chunk) - 1), chunk[1:]
        base = model.log_probs(chunk[:-1], f16, f16)
        nll["f16"].append(-base[targets])
        for f in args.formats:
            k, _, v = f.partition("/")
            lp = model.log_probs(chunk[:-1], side(k), side(v or k), args.recent)
            nll[f].append(-lp[targets])
            kl[f].append((np.exp(base) * (base - lp)).sum(1))
    p0 = math.exp(np.concatenate(nll["f16"]).mean())
    print(f"{len(ids):,} tokens ({sysconfig.get_paths()['stdlib']}), f16 perplexity {p0:.4f}")
    for f in args.formats:
        p = math.exp(np.concatenate(nll[f]).mean())
        print(f"{f:22s} perplexity {p:.4f} {p / p0 - 1:+.2%}  mean KL {np.concatenate(kl[f]).mean():.5f}")


if __name__ == "__main__":
    main()
