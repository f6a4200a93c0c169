"""Embeddings from a causal language model (Model.embed): the final hidden states of a text,
pooled, as llama.cpp (--pooling last/mean) and vLLM's embedding runner make them, and as
decoder embedding models (Qwen3-Embedding, e5-mistral, gte-Qwen) are used.

The engine hands out the residual stream after the last layer (Model.eval's hidden_states=[-1],
taken before the output norm); the output norm is applied here, on the host, so that the rows
are transformers' last_hidden_state: RMSNorm with the model's output_norm weights (scaled by
1 + w where the architecture says so and the file stores w, as Hugging Face gemma files do).
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from akunu import _akunu

POOLINGS = ("last", "mean")
# The output norm's tensor in each file format (GGUF names, else Hugging Face names).
_NORM_NAMES = ("output_norm.weight", "model.norm.weight", "model.language_model.norm.weight")


@lru_cache(maxsize=8)
def _output_norm(path: str) -> np.ndarray:
    """The effective RMSNorm scale of the output norm: float32 [dim]."""
    files = _akunu.open_model(path)
    names = {t["name"] for t in files.tensors}
    name = next((n for n in _NORM_NAMES if n in names), None)
    if name is None:
        raise _akunu.Error(f"{path}: no output norm tensor (looked for {', '.join(_NORM_NAMES)})")
    arch = _akunu.load_config(files).architecture
    row = next(a for a in _akunu.arch_table() if a["name"] == arch)
    if row["norm"] != "rms":
        raise _akunu.Error(f"{path}: {arch}'s output norm is {row['norm']}, and Model.embed applies RMSNorm only")
    w = np.asarray(files.tensor(name, True), dtype=np.float32)
    # GGUF files store gemma's scale as w + 1 already (docs/architecture.md, "Loading a model").
    return w + 1.0 if row["norm_plus_one"] and files.format != "gguf" else w


def embed(model, texts: Sequence[str], pooling: str = "last", normalize: bool = True) -> np.ndarray:
    """[len(texts), dim] float32: each text tokenized with the model's special tokens (BOS),
    run alone from an empty cache, its final hidden states pooled (last: the last token's row;
    mean: the average of its rows), L2-normalized unless told not to. The KV cache is reset."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("embed takes a list of strings; wrap a single text in a list")
    texts = list(texts)
    if not texts:
        raise ValueError("embed needs at least one text")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS} for a causal language model, not {pooling!r}")
    scale = _output_norm(model.path)
    eps = model.config.as_dict()["norm_eps"]
    out = np.empty((len(texts), model.config.dim), dtype=np.float32)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is a {type(text).__name__}, not a str")
        ids = model.tokenize(text)
        if not ids:
            raise ValueError(f"texts[{i}] has no tokens")
        if len(ids) > model.context:
            raise ValueError(f"texts[{i}] has {len(ids)} tokens; the model's context is {model.context}")
        model.reset()
        _, hidden = model.eval(ids, hidden_states=[-1])
        h = hidden[-1].astype(np.float64)
        rows = h / np.sqrt((h * h).mean(axis=1, keepdims=True) + eps) * scale
        out[i] = rows[-1] if pooling == "last" else rows.mean(axis=0)
    model.reset()
    if normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out
