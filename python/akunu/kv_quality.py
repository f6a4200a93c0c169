"""How much a quantized KV cache costs in quality: perplexity, and the mean KL divergence of each
next-token distribution from the one an f16 cache gives, on the same tokens.

    python -m akunu kv-quality MODEL [--tokens 50000] [--text FILE ...]

Without --text the corpus is this Python's standard library: its *.py files in path order
(test suites left out), each framed with the model's BOS and EOS ids and concatenated, then cut
into windows of the model's context, each scored from an empty cache (as Model.score does).
"""
from __future__ import annotations

import math
import pathlib
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from akunu import _progress

FORMATS = ("f16", "q8", "q8/int4", "q8/fp4", "int4", "fp4", "int4h", "fp4h", "int4h+w8", "fp4h+w8")


@dataclass
class KvQuality:
    kv_dtype: str
    kv_bytes: int           # the cache at the model's context
    perplexity: float
    kl_mean: float          # mean KL(f16 || this) over predicted tokens, nats
    kl_p99: float           # its 99th percentile
    top1_agreement: float   # fraction of positions whose argmax matches f16's
    device: str = ""        # where it ran


def python_corpus(tokenizer, n_tokens: int, bos: int | None, eos: int | None) -> list[int]:
    """At least n_tokens ids of the standard library's source (see the module docstring)."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    ids: list[int] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "test" in rel.split("/")[0] or "/test" in rel or "site-packages" in rel:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        ids += ([bos] if bos is not None else []) + tokenizer.encode(text, False) + ([eos] if eos is not None else [])
        if len(ids) >= n_tokens:
            break
    return ids[:n_tokens]


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def measure(path, ids: Sequence[int], formats: Sequence[str] = FORMATS, context: int | None = None,
            progress: bool | None = None, device=None) -> list[KvQuality]:
    """KvQuality of each kv_dtype on `ids`, f16 first (its KL is 0 by definition), on `device`
    (as Model takes it). progress: a bar over the tokens (None: on a terminal or in a notebook)."""
    from akunu.model import Model

    formats = ["f16"] + [f for f in formats if f != "f16"]
    models = {f: Model(path, context=context, progress=False, kv_dtype=f, device=device) for f in formats}
    window = models["f16"].context
    nll = {f: [] for f in formats}
    kl = {f: [] for f in formats}
    agree = {f: [] for f in formats}
    bar = _progress.bar(max(0, len(ids) - 1), "kv-quality", "tok", progress)
    for at in range(0, len(ids) - 1, window):
        chunk = list(ids[at: at + window + 1])
        if len(chunk) < 2:
            break
        targets = np.asarray(chunk[1:])
        base = None
        for f in formats:
            m = models[f]
            m.reset()
            lp = _log_softmax(m._engine.eval(chunk[:-1], True))
            nll[f].append(-lp[np.arange(len(targets)), targets])
            if base is None:
                base = lp
            kl[f].append((np.exp(base) * (base - lp)).sum(axis=1))
            agree[f].append(lp.argmax(1) == base.argmax(1))
        bar.update(len(targets))
    bar.close()
    out = []
    for f in formats:
        k = np.concatenate(kl[f])
        ppl = math.exp(float(np.concatenate(nll[f]).mean()))
        out.append(KvQuality(f, models[f].memory_report()["kv_cache"][1], ppl, float(k.mean()),
                             float(np.percentile(k, 99)), float(np.concatenate(agree[f]).mean()),
                             models[f].device.name))
    return out


def markdown(rows: list[KvQuality], n_tokens: int) -> str:
    f16 = rows[0]
    lines = ["| kv_dtype | KV bytes | perplexity | Δ vs f16 | mean KL (nats) | KL p99 | top-1 = f16 |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.kv_dtype} | {r.kv_bytes / f16.kv_bytes:.0%} | {r.perplexity:.4f} | "
                     f"{(r.perplexity / f16.perplexity - 1):+.2%} | {r.kl_mean:.5f} | {r.kl_p99:.4f} | "
                     f"{r.top1_agreement:.2%} |")
    lines.append(f"\n{n_tokens:,} tokens on {f16.device}; KV bytes relative to f16.")
    return "\n".join(lines)
