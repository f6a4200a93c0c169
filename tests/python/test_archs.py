"""Gemma 1, Gemma 2, Mistral and Qwen2 against transformers' float64 forward: tiny random models
built at test time (tests/python/support/hf_archs.py), run from their safetensors directory and from a
GGUF written as llama.cpp's converter writes it. All-position logits through the decode path
(GEMV, split attention), one prefill (GEMM, flash attention) and odd-sized prefill chunks, with
prompts longer than the sliding windows; greedy continuations; the config each loader reads."""
from __future__ import annotations

import numpy as np
import pytest

import akunu

hf_archs = pytest.importorskip("support.hf_archs",
                               reason="torch, transformers, tokenizers and gguf-py build the reference models")

# fp32 compute with an f16 KV cache and f16-exact weights, scaled by the logits' size (these
# models' logits reach 5 to 27). Measured on lavapipe: max |dlogit| 4e-4 to 4e-3 (the f16 cache
# dominates: prefill and decode agree), mean 5e-5 to 6e-4; a window one token off moves logits
# by ~3, a missing soft cap by 2 to 20.
MAX_REL, MAX_ABS, MEAN_ABS = 1e-3, 6e-3, 2e-3

SOURCES = [(c.name, s) for c in hf_archs.CASES for s in ("hf", "hf-bf16")] + \
    [(c.name, s) for c in hf_archs.CASES if c.gguf_exact for s in ("gguf", "gguf-q8_0")]
IDS = [f"{c}:{s}" for c, s in SOURCES]

_BUILT = {}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    def get(name):
        if name not in _BUILT:
            _BUILT[name] = hf_archs.build(hf_archs.CASE[name], tmp_path_factory.mktemp(name))
        return _BUILT[name]
    return get


def prompt(n: int, vocab: int, seed: int = 7) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(2, vocab, n)]


def open_model(built, source, **options):
    return akunu.Model(built.paths[source], context=96, progress=False, **options)


def assert_logits_close(got, want, what):
    scale = np.abs(want).max()
    err = np.abs(got - want)
    assert err.max() <= MAX_REL * scale + MAX_ABS, f"{what}: max |dlogit| {err.max():.4f} (logits up to {scale:.1f})"
    assert err.mean() <= MEAN_ABS, f"{what}: mean |dlogit| {err.mean():.5f}"
    top2 = np.sort(want, axis=1)[:, -2:]
    sure = top2[:, 1] - top2[:, 0] > 0.05
    assert np.array_equal(got.argmax(1)[sure], want.argmax(1)[sure]), f"{what}: top-1 differs"


@pytest.mark.parametrize("case, source", SOURCES, ids=IDS)
def test_config_is_read_as_transformers_reads_it(models, case, source):
    b = models(case)
    hf = b.model.config
    c = open_model(b, source).config.as_dict()
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    assert c["n_layers"] == hf.num_hidden_layers and c["head_dim"] == head_dim
    assert c["n_kv_heads"] == hf.num_key_value_heads and c["vocab_size"] == b.vocab
    types = getattr(hf, "layer_types", None) or ["full_attention"] * hf.num_hidden_layers
    window = getattr(hf, "sliding_window", None) or 0
    if any(t == "sliding_attention" for t in types):
        assert c["sliding_window"] == window
        assert c["layer_sliding"] == [t == "sliding_attention" for t in types]
    elif b.case.model_type == "mistral" and window:  # every layer slides in transformers' mistral
        assert c["sliding_window"] == window and c["layer_sliding"] == [True] * hf.num_hidden_layers
    else:
        assert c["sliding_window"] == 0 and not any(c["layer_sliding"])
    assert c["attn_softcap"] == pytest.approx(getattr(hf, "attn_logit_softcapping", None) or 0)
    assert c["final_softcap"] == pytest.approx(getattr(hf, "final_logit_softcapping", None) or 0)
    qpas = getattr(hf, "query_pre_attn_scalar", None) or head_dim
    assert c["attn_scale"] == pytest.approx(qpas ** -0.5, rel=1e-6)
    assert c["tied_embeddings"] == bool(hf.tie_word_embeddings)
    assert c["qkv_bias"] == (b.case.model_type == "qwen2")


@pytest.mark.parametrize("path", ["decode", "prefill", "chunks"])
@pytest.mark.parametrize("case, source", SOURCES, ids=IDS)
def test_logits_at_every_position(models, case, source, path):
    """decode: one token per step; prefill: one eval(all_logits=True); chunks: prefill chunks of
    5 tokens, started after tokens already in the cache, so chunk edges fall inside windows."""
    b = models(case)
    ids = prompt(41, b.vocab)
    want = b.logits(ids, source)
    assert len(ids) > 3 * max(b.case.window, 1)
    if path == "chunks":
        m = open_model(b, source, prefill_chunk=5)
        m.eval(ids[:3])
        got = np.concatenate([want[:3], m.eval(ids[3:], all_logits=True, reset=False)])
    else:
        m = open_model(b, source)
        if path == "decode":
            got = np.stack([m.eval([i], reset=False).copy() for i in ids])
        else:
            got = m.eval(ids, all_logits=True, reset=False)
    assert_logits_close(got, want, f"{case} {source} {path}")
    # The last-row logits (what sampling reads) after a prefill equal the all-position ones.
    m.reset()
    np.testing.assert_allclose(m.eval(ids), got[-1], atol=MAX_REL * np.abs(want).max() + MAX_ABS)


@pytest.mark.parametrize("case, source", [(c, s) for c, s in SOURCES if s in ("hf", "gguf")],
                         ids=[f"{c}:{s}" for c, s in SOURCES if s in ("hf", "gguf")])
def test_kv_cache_matches_transformers(models, case, source):
    """K after RoPE and V of every layer after a prompt past the window. A llama GGUF (mistral)
    holds each K head in llama.cpp's permuted order: k_gguf[..., 2i] = k_hf[..., i] and
    k_gguf[..., 2i + 1] = k_hf[..., i + head_dim/2]."""
    b = models(case)
    ids = prompt(29, b.vocab, seed=5)
    m = open_model(b, source)
    m.eval(ids)
    for layer in range(m.config.n_layers):
        want_k, want_v = b.kv(ids, layer)
        k = m.kv_cache.k(layer).astype(np.float64)
        v = m.kv_cache.v(layer).astype(np.float64)
        assert k.shape[:2] == (b.model.config.num_key_value_heads, len(ids))
        if source == "gguf" and m.config.architecture == "llama":
            k = np.concatenate([k[..., 0::2], k[..., 1::2]], axis=-1)
        rows = want_k.shape[1]  # a sliding layer's cache may keep only its last rows
        np.testing.assert_allclose(k[:, -rows:], want_k, rtol=2e-3, atol=2e-3 * np.abs(want_k).max())
        np.testing.assert_allclose(v[:, -rows:], want_v, rtol=2e-3, atol=2e-3 * np.abs(want_v).max())


@pytest.mark.parametrize("case, source", SOURCES, ids=IDS)
def test_greedy_continuations(models, case, source):
    """Eight greedy tokens after a prompt longer than the window: free-running up to the first
    step whose reference top1 - top2 margin is near our logit error (near-ties may flip), and
    fed the reference's tokens, at every step with a clear margin."""
    b = models(case)
    ids = prompt(30, b.vocab, seed=11)
    want, margins = b.greedy(ids, 8, source)
    clear = [mg >= 0.02 for mg in margins]  # 5x the largest |dlogit| seen
    m = open_model(b, source)
    m.eval(ids)
    got = []
    for _ in want:
        got.append(m._engine.sampled_token())
        m.eval([got[-1]], reset=False)
    n = clear.index(False) if False in clear else len(want)
    assert got[:n] == want[:n]
    m.reset()
    m.eval(ids)
    forced = []
    for tok in want:
        forced.append(m._engine.sampled_token())
        m.eval([tok], reset=False)
    assert [g for g, c in zip(forced, clear) if c] == [w for w, c in zip(want, clear) if c]
    assert sum(clear) >= 4, f"margins {margins}: too few steps to check"


def test_final_softcap_bounds_every_logits_output(models):
    """gemma2: |logit| < cap in the last-row logits, all-position logits and the decode step's
    logits, and the sampler's log-probabilities (single steps and chains) are those of the
    capped logits."""
    b = models("gemma2")
    cap = b.model.config.final_logit_softcapping
    m = open_model(b, "hf")
    ids = prompt(20, b.vocab, seed=3)
    rows = m.eval(ids, all_logits=True)
    assert np.abs(rows).max() < cap and np.abs(rows).max() > 0.5 * cap  # the cap bites
    m.reset()
    last = m.eval(ids).copy()
    step = m.eval([5], reset=False).copy()
    assert np.abs(last).max() < cap and np.abs(step).max() < cap
    lse = np.log(np.exp(step.astype(np.float64)).sum())
    assert m._engine.sampled_logprob() == pytest.approx(step.max() - lse, abs=1e-4)
    # Chained decode (3 steps per submission, past the 12-token window) samples from capped
    # logits too: its tokens and logprobs are those of single steps.
    pieces = list(open_model(b, "hf", chain=3).generate(ids, max_tokens=14))
    m.reset()
    logits = m.eval(ids).astype(np.float64)
    for p in pieces:
        assert p.token_id == int(np.argmax(logits))
        assert p.logprob == pytest.approx(logits[p.token_id] - np.log(np.exp(logits).sum()), abs=1e-4)
        logits = m.eval([p.token_id], reset=False).astype(np.float64)
    assert len(pieces) >= 8


@pytest.mark.parametrize("case", [c.name for c in hf_archs.CASES])
def test_soft_capping_is_in_the_table_only_where_the_model_has_it(models, case):
    """The decode step caps its logits right before sampling when the config has a final cap;
    other models record no dispatch for it."""
    b = models(case)
    table = open_model(b, "hf").dispatch_table()
    capped = [c for c in table if c["kernel"] == "softcap"]
    if getattr(b.model.config, "final_logit_softcapping", None):
        assert len(capped) == 1 and table[-2]["label"] == "final_softcap" and table[-1]["kernel"] == "sample"
    else:
        assert not capped


def test_mistral_gguf_as_the_converter_writes_it(models, tmp_path):
    """convert_hf_to_gguf.py writes MistralForCausalLM as a llama GGUF without a sliding-window
    key: akunu then attends over the whole context (as llama.cpp does), which equals
    transformers' mistral while the prompt fits in the window."""
    b = models("mistral")
    path = tmp_path / "mistral-no-window.gguf"
    case = hf_archs.CASE["mistral"]
    hf_archs.write_gguf(hf_archs.dataclasses.replace(case, gguf_window=False), b.hf_dir, b.model,
                        hf_archs.write_tokenizer(tmp_path), path)
    m = akunu.Model(path, context=64, progress=False)
    assert m.config.architecture == "llama" and m.config.as_dict()["sliding_window"] == 0
    ids = prompt(case.window, b.vocab)
    assert_logits_close(m.eval(ids, all_logits=True), b.logits(ids), "mistral gguf without window")
