"""The engine against the reference fixtures (transformers' float64 forward passes): logits at
every prompt position, the KV cache, greedy continuations; plus the hot path allocating
nothing, and bad input failing cleanly."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import akunu
from support.fixture_paths import FIXTURES, require
from support.int8_x import INT8_X_ALLOWANCE, INT8_X_ALLOWANCE_RANDOM, decode_rounds_x

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

# (model, source, reference logits prefix, max |dlogit|): fp32 compute with an f16 KV cache,
# held to the fixture README's fp16 thresholds (0.05 random models, 0.1 the trained one).
SOURCES = [
    ("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf", "logits", 0.05),
    ("tiny-llama3-random", "gguf/tiny-llama3-random-q8_0.gguf", "logits_q8_0", 0.05),
    ("tiny-llama3-random", "hf", "logits", 0.05),
    ("tiny-llama3-random", "hf-bf16", "logits", 0.05),
    ("tiny-qwen3-random", "gguf/tiny-qwen3-random-f16.gguf", "logits", 0.05),
    ("tiny-qwen3-random", "gguf/tiny-qwen3-random-q8_0.gguf", "logits_q8_0", 0.05),
    ("tiny-qwen3-random", "hf", "logits", 0.05),
    ("tiny-gemma3-random", "gguf/tiny-gemma3-random-f16.gguf", "logits", 0.05),
    ("tiny-gemma3-random", "gguf/tiny-gemma3-random-q8_0.gguf", "logits_q8_0", 0.05),
    ("tiny-gemma3-random", "hf", "logits", 0.05),
    ("trained-code-llama", "gguf/trained-code-llama-f16.gguf", "logits", 0.1),
    ("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf", "logits_q8_0", 0.1),
    ("trained-code-llama", "hf", "logits", 0.1),
]


def manifest(model):
    return json.loads(require(model, "manifest.json").read_text())


_MODELS = {}


def load(model, source, context=256):
    key = (model, source, context, os.environ.get("AKUNU_DEVICE"))
    if key not in _MODELS:
        _MODELS[key] = akunu.Model(require(model, source), context=context, progress=False)
    return _MODELS[key]


@pytest.mark.parametrize("path", ["decode", "prefill"])
@pytest.mark.parametrize("model, source, ref, tol", SOURCES, ids=[f"{m}:{s}" for m, s, _, _ in SOURCES])
def test_logits_at_every_position(model, source, ref, tol, path):
    """decode: one token per step (GEMV, split attention); prefill: the whole prompt in one
    eval(all_logits=True) (GEMM, flash attention)."""
    m = load(model, source)
    man = manifest(model)
    prompts = man.get("logit_prompts") or man["prompts"]  # the trained model keeps them apart
    mean_tol = 5e-3
    if path == "decode" and decode_rounds_x(m, source):
        extra_max, extra_mean = INT8_X_ALLOWANCE.get(model, INT8_X_ALLOWANCE_RANDOM)
        tol, mean_tol = tol + extra_max, mean_tol + extra_mean
    checked = 0
    for k, p in enumerate(prompts):
        ref_file = FIXTURES / model / "ref" / f"{ref}_p{p.get('index', k)}.npy"
        if not ref_file.exists():
            continue
        checked += 1
        want = np.load(ref_file)
        m.reset()
        if path == "decode":
            got = np.stack([m.eval([i], reset=False).copy() for i in p["ids"]])
        else:
            got = m.eval(p["ids"], all_logits=True, reset=False)
        err = np.abs(got - want)
        assert err.max() <= tol, f"prompt {k}: max |dlogit| {err.max():.4f}"
        assert err.mean() <= mean_tol, f"prompt {k}: mean |dlogit| {err.mean():.5f}"
        top2 = np.sort(want, axis=1)[:, -2:]
        sure = top2[:, 1] - top2[:, 0] > 0.1
        assert np.array_equal(got.argmax(1)[sure], want.argmax(1)[sure]), f"prompt {k}: top-1 differs"
    assert checked >= 2


@pytest.mark.parametrize("model, source", [("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf"),
                                           ("tiny-llama3-random", "hf"),
                                           ("tiny-qwen3-random", "gguf/tiny-qwen3-random-f16.gguf"),
                                           ("tiny-gemma3-random", "hf"),
                                           ("trained-code-llama", "gguf/trained-code-llama-f16.gguf")])
def test_kv_cache_matches_the_reference(model, source):
    """K and V of prompt 0 in layer 0 and the last layer. A GGUF llama holds each K head in
    llama.cpp's permuted order (its Q/K rows were permuted for interleaved RoPE):
    k_gguf[..., 2i] = k_hf[..., i] and k_gguf[..., 2i + 1] = k_hf[..., i + head_dim/2]."""
    m = load(model, source)
    m.reset()
    m.eval(manifest(model)["prompts"][0]["ids"])
    permuted = source.endswith(".gguf") and m.config.architecture == "llama"
    for layer in sorted({0, m.config.n_layers - 1}):
        path_k = FIXTURES / model / "ref" / f"k_p0_l{layer}.npy"
        if not path_k.exists():
            continue
        want_k, want_v = np.load(path_k), np.load(FIXTURES / model / "ref" / f"v_p0_l{layer}.npy")
        k = m.kv_cache.k(layer).astype(np.float32)
        v = m.kv_cache.v(layer).astype(np.float32)
        assert k.shape == want_k.shape and v.shape == want_v.shape
        if permuted:
            half = k.shape[-1] // 2
            k = np.concatenate([k[..., 0::2], k[..., 1::2]], axis=-1)
            assert half > 0
        scale = np.abs(want_k).max()
        np.testing.assert_allclose(k, want_k, rtol=2e-3, atol=2e-3 * scale)
        np.testing.assert_allclose(v, want_v, rtol=2e-3, atol=2e-3 * np.abs(want_v).max())


@pytest.mark.parametrize("model, source", [("trained-code-llama", "gguf/trained-code-llama-f16.gguf"),
                                           ("tiny-qwen3-random", "gguf/tiny-qwen3-random-f16.gguf"),
                                           ("tiny-gemma3-random", "gguf/tiny-gemma3-random-f16.gguf")])
def test_greedy_continuations(model, source):
    """Token by token, up to the first step whose reference top1-top2 margin is below our
    logit tolerance (near-ties may legitimately flip)."""
    m = load(model, source)
    for p in manifest(model)["prompts"]:
        want = p.get("greedy16") or p.get("greedy64")
        ids, margins = want["ids"], want.get("top1_minus_top2_logit")
        n = len(ids) if not margins else next((i for i, mg in enumerate(margins) if mg < 0.05), len(ids))
        got = _greedy(m, p["ids"], len(ids))
        assert got[:n] == ids[:n], p["text"][:40]


@pytest.mark.parametrize("model, source", [("tiny-gemma3-random", "hf"),
                                           ("tiny-qwen3-random", "gguf/tiny-qwen3-random-q8_0.gguf"),
                                           ("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf")])
def test_prefill_chunks_equal_decode_steps(model, source):
    """A prompt split over chunks of an odd size (7: chunk edges fall inside GEMM and flash
    attention tiles, and past gemma3's 32-token sliding window), started after tokens already
    in the cache, gives the decode path's logits, KV cache and next token (within the int8
    rounding of x where the decode GEMVs round it and the GEMMs do not)."""
    ids = [p["ids"] for p in manifest(model)["prompts"]]
    head, prompt = ids[0][:5], ids[1][:45]
    chunked = akunu.Model(require(model, source), context=128, prefill_chunk=7, progress=False)
    stepped = load(model, source)
    stepped.reset()
    for i in head:
        stepped.eval([i], reset=False)
    want = np.stack([stepped.eval([i], reset=False).copy() for i in prompt])
    chunked.eval(head)
    got = chunked.eval(prompt, all_logits=True, reset=False)
    assert got.shape == (len(prompt), chunked.config.vocab_size)
    scale = np.abs(want).max()
    rounding = decode_rounds_x(stepped, source)
    extra = INT8_X_ALLOWANCE.get(model, INT8_X_ALLOWANCE_RANDOM)[0] if rounding else 0.0
    np.testing.assert_allclose(got, want, atol=2e-3 * scale + 2e-3 + extra)
    chunked.kv_cache.truncate(len(head))
    last = chunked.eval(prompt, reset=False)  # the last-row path, without all-position logits
    np.testing.assert_allclose(last, want[-1], atol=2e-3 * scale + 2e-3 + extra)
    top2 = np.sort(want[-1])[-2:]
    if top2[1] - top2[0] > 2 * extra:
        assert chunked._engine.sampled_token() == int(np.argmax(last))
    for layer in (0, chunked.config.n_layers - 1):
        k_chunked = chunked.kv_cache.k(layer).astype(np.float32)
        k_stepped = stepped.kv_cache.k(layer).astype(np.float32)
        # int8 rounding of x moves K by about 1 % of its scale.
        k_extra = 2e-2 * np.abs(k_stepped).max() if rounding else 0.0
        np.testing.assert_allclose(k_chunked, k_stepped, atol=5e-3 * scale + k_extra)
        np.testing.assert_allclose(chunked.kv_cache.v(layer).astype(np.float32),
                                   stepped.kv_cache.v(layer).astype(np.float32), atol=5e-3 * scale)


def test_prefill_barriers_skip_dispatches_of_disjoint_row_windows(backend, monkeypatch):
    """A chunk's GEMMs for short and for long chunks write the same rows, but only one has
    workgroups for any chunk: the recorded chunk puts no barrier between them, and each long
    projection's dequantization (into the next of four f16 buffers, placed right after the
    GEMM before its projection or its group of projections) joins that GEMM's barrier interval. With
    tuning row_windows=0 the windows are ignored and the same table waits at more
    barriers; the logits agree to the bit."""
    if backend == "cpu":
        pytest.skip("the CPU backend records each chunk's counts resolved, not as indirect dispatches, so row windows "
                    "do not enter its barrier tracking; nor does its prefill dequantize block formats")
    path = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    prompt = [i for p in manifest("trained-code-llama")["prompts"] for i in p["ids"]][:20]
    # Without the tile GEMV's window of a few rows (gemm_tile_rows), which adds a third GEMM.
    windows = akunu.Model(path, context=128, prefill_chunk=20, progress=False,
                          tuning={"prefill_dequant_rows": 16, "gemm_tile_rows": 0})
    ranges = akunu.Model(path, context=128, prefill_chunk=20, progress=False,
                         tuning={"prefill_dequant_rows": 16, "row_windows": False, "gemm_tile_rows": 0})
    layers = windows.config.n_layers
    # Each of a layer's 7 projections has a GEMM for chunks under 16 tokens and one after the
    # dequantization, which ranges alone separate by a barrier (both write y). Windows save it
    # for all 7 but K's and V's in the first layer: the dequantizations of a group (Q, K and V;
    # gate and up) all run beside the f16 GEMM before the group, so no GEMM of the group waits
    # for its own weights, except where no GEMM comes before (layer 0's Q, K and V).
    assert windows.barrier_count(prefill=True) == ranges.barrier_count(prefill=True) - (7 * layers - 2)
    np.testing.assert_array_equal(windows.eval(prompt, all_logits=True), ranges.eval(prompt, all_logits=True))


def test_prefill_qkv_gemms_share_a_barrier_interval(backend, monkeypatch):
    """A chunk's Q, K and V GEMMs write separate columns of one [rows, q | k | v] buffer
    (column views, Binding::columns), so no barrier stands between them. With
    tuning column_views=0 the views are tracked as plain ranges, which meet row by row: two
    barriers more a layer, and the logits and cache agree to the bit."""
    path = require("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")
    prompt = [i for p in manifest("trained-code-llama")["prompts"] for i in p["ids"]][:37]
    views = akunu.Model(path, context=128, prefill_chunk=20, progress=False)
    ranges = akunu.Model(path, context=128, prefill_chunk=20, progress=False, tuning={"column_views": False})
    layers = views.config.n_layers
    assert views.barrier_count(prefill=True) == ranges.barrier_count(prefill=True) - 2 * layers
    # The table shows each GEMM's output as its columns of the qkv rows (y is binding 2).
    c = views.config
    row = 4 * (c.q_dim + 2 * c.kv_dim)
    gemms = {r["label"]: r for r in views.dispatch_table(prefill=True) if r["label"].startswith("blk.0.attn_")}
    for name, first, width in (("q", 0, c.q_dim), ("k", c.q_dim, c.kv_dim), ("v", c.q_dim + c.kv_dim, c.kv_dim)):
        y = gemms[f"blk.0.attn_{name}"]
        assert y["columns"][2] == (row, 4 * width) and y["bindings"][2][1] == 4 * first, (name, y)
        assert y["columns"][0] is None  # the weights: a plain range
    np.testing.assert_array_equal(views.eval(prompt, all_logits=True), ranges.eval(prompt, all_logits=True))
    for layer in range(layers):
        np.testing.assert_array_equal(views.kv_cache.k(layer), ranges.kv_cache.k(layer))
        np.testing.assert_array_equal(views.kv_cache.v(layer), ranges.kv_cache.v(layer))


def test_long_chunks_dequantize_block_weights(backend, monkeypatch):
    """Prefill chunks of at least DeviceProfile.prefill_dequant_rows tokens dequantize each
    block-format projection into f16 scratch and run the f16 GEMM on it; shorter chunks run the
    block format's own GEMM. With the threshold at 16 tokens and chunks of 20, a 41-token prompt
    takes both ways (chunks of 20, 20 and 1) and gives the logits and KV cache of a model that
    never dequantizes, within the f16 rounding of the weights."""
    if backend == "cpu":
        pytest.skip("the CPU backend's prefill reads block formats directly: it has no dequantizing path")
    path = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    prompt = [i for p in manifest("trained-code-llama")["prompts"] for i in p["ids"]][:41]
    scratch = dict(akunu.plan(path, context=128, prefill_chunk=20, tuning="prefill_dequant_rows=16").prefill_scratch)
    assert all(f"batch_weights_f16_{i}" in scratch for i in range(4))
    dequantizing = akunu.Model(path, context=128, prefill_chunk=20, progress=False, tuning="prefill_dequant_rows=16")
    scratch = dict(akunu.plan(path, context=128, prefill_chunk=20, tuning="prefill_dequant_rows=0").prefill_scratch)
    assert not any(name.startswith("batch_weights_f16") for name in scratch)
    plain = akunu.Model(path, context=128, prefill_chunk=20, progress=False, tuning="prefill_dequant_rows=0")
    assert len(prompt) == 41
    got, want = dequantizing.eval(prompt, all_logits=True), plain.eval(prompt, all_logits=True)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, atol=2e-3 * scale + 2e-3)
    assert dequantizing.memory_report()["prefill_scratch"][1] > plain.memory_report()["prefill_scratch"][1]
    for layer in (0, plain.config.n_layers - 1):
        np.testing.assert_allclose(dequantizing.kv_cache.k(layer).astype(np.float32),
                                   plain.kv_cache.k(layer).astype(np.float32), atol=5e-3 * scale)


def _greedy(m, prompt_ids, n):
    """Greedy ids without stopping at EOS (the reference does not stop)."""
    m.reset()
    m.eval(prompt_ids)
    out = []
    for _ in range(n):
        out.append(m._engine.sampled_token())
        m.eval([out[-1]], reset=False)
    return out


def test_trained_model_continues_code():
    m = load("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf")
    result = m.generate("import numpy as np\n\n\ndef ", max_tokens=12, stream=False)
    assert result.text.startswith("zeros_like(x):")
    assert len(result.token_ids) == len(result.logprobs) == 12 and result.stop_reason == "max_tokens"
    assert all(lp <= 0 for lp in result.logprobs)
    assert result.prompt_tokens_per_second > 0 and result.decode_tokens_per_second > 0


def test_decoding_allocates_nothing():
    m = load("tiny-qwen3-random", "gguf/tiny-qwen3-random-q8_0.gguf")
    before = m.memory_report()["device_allocations"]
    m.reset()
    list(m.generate("hello world", max_tokens=20))
    m.eval(m.tokenize("more text"), reset=False)
    assert m.memory_report()["device_allocations"] == before


def test_memory_report_equals_the_plan_to_the_byte():
    m = load("tiny-gemma3-random", "gguf/tiny-gemma3-random-q8_0.gguf")
    report = m.memory_report()
    for part in ("weights", "kv_cache", "decode_scratch", "prefill_scratch"):
        planned, allocated = report[part]
        assert planned == allocated, part
    plan = akunu.plan(require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-q8_0.gguf"), context=256,
                      prefill_chunk=m._engine.prefill_chunk, max_chain=m._engine.chain)
    assert plan.kv_bytes == report["kv_cache"][1]
    assert plan.prefill_scratch_bytes == report["prefill_scratch"][1]
    assert plan.decode_scratch_bytes == report["decode_scratch"][1]


def test_views_and_dispatch_table(backend):
    m = load("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf")
    m.reset()
    m.eval(m.tokenize("abc"))
    assert m.kv_cache.current_length == len(m.tokenize("abc"))
    assert m.kv_cache.k(1).shape == (2, m.kv_cache.current_length, 64)
    assert {"h0", "qkv", "logits", "token_ids"} <= set(m.scratch.names())
    assert m.scratch["logits"].shape == (2048,)
    table = m.dispatch_table()
    kernels = {c["kernel"] for c in table}
    gemv = "gemv_f16_t32" if backend == "cpu" else "gemv_f16"  # the CPU keeps matrices in tiles
    assert {"embed_f16", gemv, "attention_split", "sample"} <= kernels
    # A decode step's RoPE and KV write ride on the Q/K/V GEMV on Vulkan devices
    # (rope_fold.glsl); the CPU backend runs rope_kv on its own. The same for the HF checkpoint,
    # whose RoPE pairs (i, i + head_dim / 2) instead of neighbouring rows; its logits are held
    # to transformers' by test_logits_at_every_position, its cache by test_kv_cache_matches_the_reference.
    assert ("rope_kv" in kernels) == (backend == "cpu")
    hf = load("tiny-llama3-random", "hf")
    assert ("rope_kv" in {c["kernel"] for c in hf.dispatch_table()}) == (backend == "cpu")
    # Decode attention merges its chunks in its own dispatch. The FFN activation runs in no
    # dispatch of its own: on the CPU backend the down GEMV forms it, on Vulkan devices the
    # gate/up GEMV writes it (kernels.gemv_gate_up: gemv_gate_up.comp's GATED, its spec constant 5).
    assert "attention_merge" not in kernels and "act_silu" not in kernels
    if backend != "cpu":
        gate_up = next(c for c in table if c["label"] == "blk.0.ffn_gate_up")
        assert gate_up["kernel"] == "gemv_gate_up_f16" and gate_up["spec"][5] != 0, gate_up
    assert table[0]["label"] == "token_embd" and table[-1]["label"] == "sample"
    m.kv_cache.truncate(1)
    assert m.kv_cache.current_length == 1
    with pytest.raises(akunu.Error, match="truncate"):
        m.kv_cache.truncate(5)


def test_quantized_matrices_load_in_the_devices_tiles(backend):
    """Q8_0 projection matrices are uploaded tile-major in the device's layout (formats/tiles.h): 4-byte
    chunks (Q8_0_T32) on the CPU backend, 16-byte chunks (Q8_0_T32V) on Vulkan devices, and the
    decode GEMVs run the kernels of that layout."""
    path = str(require("tiny-llama3-random", "gguf/tiny-llama3-random-q8_0.gguf"))
    tiled = "Q8_0_T32" if backend == "cpu" else "Q8_0_T32V"
    assert tiled in dict(akunu.plan(path, context=64, device=backend).weights_by_dtype)
    m = load("tiny-llama3-random", "gguf/tiny-llama3-random-q8_0.gguf")
    gemvs = {c["kernel"] for c in m.dispatch_table() if c["kernel"].startswith("gemv")}
    suffix = "_t32" if backend == "cpu" else "_t32v"
    assert gemvs and all(k.endswith(suffix) for k in gemvs), gemvs


def test_a_chunks_workgroups_follow_its_tokens(backend):
    """The prefill table is recorded for a whole chunk; every command before its tail runs
    over the chunk's rows, and a chunk of n tokens runs only the workgroups that cover them
    (test_prefill_chunks_equal_decode_steps holds the results of odd chunks to the decode path).
    The tail (the last row's norm, LM head and sampling) and the decode table do not follow."""
    m = load("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf")
    table = m.dispatch_table(prefill=True)
    tail = next(i for i, c in enumerate(table) if c["kernel"] == "last_row")
    assert tail > 0 and all(c["chunk"] is None for c in table[tail:])
    chunk = m._engine.prefill_chunk
    axes = {}
    for c in table[:tail]:
        assert c["chunk"] is not None and c["chunk"]["rows"] == chunk, c
        axes.setdefault(c["kernel"].split("_")[0], set()).add(c["chunk"]["axis"])
    # GEMMs in row tiles along y, flash attention in query blocks along x, a weight's
    # dequantization (devices with prefill_dequant_rows) whole, the rest flat counts.
    assert axes.pop("gemm") == {"y"} and axes.pop("flash") == {"x"}, axes
    assert axes.pop("dequant", {"none"}) == {"none"}, axes
    assert all(a == {"linear"} for a in axes.values()), axes
    assert all(c["chunk"] is None for c in m.dispatch_table())


def test_decode_attention_follows_the_cache_length():
    """A decode step's attention runs only the cache chunks (256 positions each) its position
    has filled: its dispatch's groups along y follow the position (position_block), set before
    each submission. Across the first chunk boundary, in a context of four chunks, single steps
    give the prefill's logits at every position, and a chained greedy run (positions set per
    chained step) gives the single steps' tokens."""
    m = load("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf", context=1024)
    attention = [c for c in m.dispatch_table() if c["kernel"].startswith("attention_split")]
    assert attention and all(c["position_block"] == 256 and c["groups"][1] == 4 for c in attention)
    ids = np.random.default_rng(7).integers(0, m.config.vocab_size, 270).tolist()
    m.reset()
    want = m.eval(ids, all_logits=True).copy()
    m.reset()
    m.eval(ids[:250])
    got = np.stack([m.eval([i], reset=False).copy() for i in ids[250:]])
    np.testing.assert_allclose(got, want[250:], atol=2e-3 * np.abs(want).max() + 2e-3)
    m.reset()
    m.eval(ids[:250])
    steps = [m._engine.sampled_token()]
    for _ in range(39):
        m.eval([steps[-1]], reset=False)
        steps.append(m._engine.sampled_token())
    chained = akunu.Model(m.path, context=1024, chain=5, progress=False).generate(ids[:250], max_tokens=40,
                                                                                   stream=False)
    assert len(chained.token_ids) >= 10 and chained.token_ids == steps[:len(chained.token_ids)]


def test_whole_counts_give_the_same_logits(monkeypatch):
    """Tuning indirect_counts=0 (the A/B switch) records every dispatch with its whole chunk's or
    context's counts: the extra workgroups return at once, so prefill and decode logits equal
    those of the indirect counts to the bit."""
    path = require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf")
    ids = [i for p in manifest("tiny-qwen3-random")["prompts"] for i in p["ids"]][:12]
    whole = akunu.Model(path, context=600, progress=False, tuning={"indirect_counts": False})
    following = akunu.Model(path, context=600, progress=False)
    for m in (whole, following):
        m.reset()
    np.testing.assert_array_equal(whole.eval(ids[:9], all_logits=True), following.eval(ids[:9], all_logits=True))
    for i in ids[9:]:
        np.testing.assert_array_equal(whole.eval([i], reset=False), following.eval([i], reset=False))


@pytest.mark.parametrize("variant", ["scalar", pytest.param("coopmat", marks=pytest.mark.gpu)])
def test_short_gemm_tiles_give_the_wide_tiles_logits(backend, monkeypatch, variant):
    """Short chunks run their GEMMs in short tiles where the device takes them
    (DeviceProfile.gemm_short_tiles): the scalar GEMM up to 64 tokens in 16 x 256 tiles
    (lavapipe; on a device with cooperative matrices through tuning coopmat=0), the
    cooperative-matrix one up to 96 tokens in 16 x 16 tiles; longer chunks the wide ones. The
    scalar short tiles sum each product in the same order, so the logits of short prompts, and of
    one past the short rows that takes the wide tiles, equal those of a model that never runs
    short tiles to the bit. The cooperative-matrix short tiles add 8 partial sums, each over its
    own 64 of every 512 columns of k (gemm_tiles.h), where the wide tiles keep one running sum
    over steps of 32: the same f16 products in f32 in two orders, whose difference four layers of
    this random model grow to a few 1e-4 of the largest logit. Both stay within the reference
    tolerance of test_logits_at_every_position, which the short tiles run for these prompts."""
    if backend == "cpu":
        pytest.skip("the CPU backend's GEMM has no tile shapes to choose")
    coopmat = variant == "coopmat"
    if coopmat and not akunu.Device().profile["gemm_coopmat"]:
        pytest.skip("needs a GPU with cooperative matrices (lavapipe runs only the scalar GEMM)")
    path = require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf")
    ids = [i for p in manifest("tiny-qwen3-random")["prompts"] for i in p["ids"]]
    ids += np.random.default_rng(5).integers(3, 1000, 80).tolist()
    rows = 96 if coopmat else 64
    tuning = {"gemm_short_rows": rows} if coopmat else {"coopmat": False, "gemm_short_rows": rows}
    profile = akunu.Device(tuning=tuning).profile
    assert profile["gemm_short_tiles"] and profile["gemm_short_rows"] == rows
    short = akunu.Model(path, context=128, progress=False, tuning=tuning)
    tuning["gemm_short_rows"] = 0
    assert not akunu.Device(tuning=tuning).profile["gemm_short_tiles"]
    wide = akunu.Model(path, context=128, progress=False, tuning=tuning)
    prefix = "gemm_cm_short_" if coopmat else "gemm_short_"
    gemms = {c["kernel"] for c in short.dispatch_table(prefill=True)}
    assert any(k.startswith(prefix) for k in gemms) and not any(
        k.startswith(prefix) for k in {c["kernel"] for c in wide.dispatch_table(prefill=True)})
    assert len(ids) > rows
    for n in (9, 29, rows, rows + 1):
        got, want = short.eval(ids[:n], all_logits=True, reset=False), wide.eval(ids[:n], all_logits=True, reset=False)
        if coopmat:
            np.testing.assert_allclose(got, want, rtol=0, atol=5e-4 * np.abs(want).max())
        else:
            np.testing.assert_array_equal(got, want)
        short.reset()
        wide.reset()


def test_bad_input_changes_nothing():
    m = load("tiny-qwen3-random", "gguf/tiny-qwen3-random-f16.gguf", context=64)
    m.reset()
    first = m.eval([1, 2, 3]).copy()
    with pytest.raises(akunu.Error, match="does not fit"):
        m.eval(list(range(100)), reset=False)
    with pytest.raises(akunu.Error, match="token id 4096 .*is out of range"):
        m.eval([5, 4096], reset=False)
    assert m.kv_cache.current_length == 3
    m.reset()
    np.testing.assert_array_equal(m.eval([1, 2, 3]), first)  # still usable, same result


def test_a_model_that_does_not_fit_fails_before_allocating(tmp_path):
    """A GGUF whose tensors claim 2 TiB (a sparse file) is refused by the plan: more than any
    machine's heaps, the CPU backend's (its host memory) included."""
    from support.gguf_bytes import STR, U32, gguf, kv, tensor_info
    dim, vocab = 16384, 1 << 24
    kvs = [kv("general.architecture", STR, "llama"), kv("llama.block_count", U32, 1),
           kv("llama.embedding_length", U32, dim),
           kv("llama.attention.head_count", U32, 32), kv("llama.feed_forward_length", U32, 64),
           kv("llama.context_length", U32, 128), kv("llama.vocab_size", U32, vocab)]
    shapes = {"token_embd.weight": [dim, vocab], "output_norm.weight": [dim], "output.weight": [dim, vocab],
              "blk.0.attn_norm.weight": [dim], "blk.0.attn_q.weight": [dim, dim], "blk.0.attn_k.weight": [dim, dim],
              "blk.0.attn_v.weight": [dim, dim], "blk.0.attn_output.weight": [dim, dim], "blk.0.ffn_norm.weight": [dim],
              "blk.0.ffn_gate.weight": [dim, 64], "blk.0.ffn_up.weight": [dim, 64], "blk.0.ffn_down.weight": [64, dim]}
    infos, offset = [], 0
    for name, ne in shapes.items():
        infos.append(tensor_info(name, ne, 0, offset))
        offset += int(np.prod(ne)) * 4
    head = gguf(kvs, infos)
    path = tmp_path / "huge.gguf"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + offset)  # sparse: no disk is used
    with pytest.raises(akunu.Error, match="does not fit"):
        akunu.Model(path, context=128, progress=False)


@pytest.mark.parametrize("stop", [None, ["Parameters"]])
def test_chain_decode_matches_single_steps(stop):
    """K steps per submission give the same tokens, the same cache length and the same cache
    contents as one step per submission, also when a stop string ends generation mid-chain."""
    path = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    results = []
    for chain in (1, 5):
        m = akunu.Model(path, context=128, progress=False, chain=chain)
        assert m._engine.chain == chain
        pieces = list(m.generate("import numpy as np\n\n\ndef ", max_tokens=40, stop=stop))
        n = m.kv_cache.current_length
        results.append(([p.token_id for p in pieces], "".join(p.text for p in pieces), n,
                        m.kv_cache.k(5).astype(np.float32).copy()))
    (ids1, text1, n1, k1), (ids5, text5, n5, k5) = results
    assert ids1 == ids5 and text1 == text5 and n1 == n5
    np.testing.assert_array_equal(k1, k5)
    if stop:
        assert "Parameters" not in text5 and text5.startswith("zeros_like(x):")


@pytest.mark.slow
def test_a_seed_gives_the_same_text_whatever_the_chain_length():
    """The determinism contract: with a seed, the sampled tokens depend on positions only, so
    chains of 1, 7 and 64 steps (pipelined two at a time) give the same tokens and logprobs."""
    path = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    sampler = akunu.Sampler(temperature=0.9, top_k=50, top_p=0.95, min_p=0.02, seed=2026)
    runs = []
    for chain in (1, 7, 64):
        m = akunu.Model(path, context=256, progress=False, chain=chain)
        r = m.generate("def fibonacci(n):\n", max_tokens=150, sampler=sampler, stream=False)
        runs.append((r.token_ids, np.round(r.logprobs, 3).tolist(), r.text, m.kv_cache.current_length))
    assert runs[0][0] == runs[1][0] == runs[2][0]
    assert runs[0][1] == runs[1][1] == runs[2][1]
    assert runs[0][3] == runs[1][3] == runs[2][3]
    greedy = akunu.Model(path, context=256, progress=False).generate("def fibonacci(n):\n", max_tokens=150,
                                                                     stream=False)
    assert runs[0][0] != greedy.token_ids  # it did sample
    other = akunu.Model(path, context=256, progress=False, chain=7).generate(
        "def fibonacci(n):\n", max_tokens=150, sampler=akunu.Sampler(0.9, 50, 0.95, 0.02, seed=7), stream=False)
    assert other.token_ids != runs[0][0]


def test_stopping_early_rewinds_the_cache():
    """Leaving the stream after three tokens keeps the prompt and the two tokens fed back,
    even though pipelined chains ran further ahead."""
    m = load("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf")
    prompt = m.tokenize("import numpy as np\n")
    for n, _ in enumerate(m.generate(prompt, max_tokens=100), 1):
        if n == 3:
            break
    assert m.kv_cache.current_length == len(prompt) + 2


def test_score_matches_the_reference_logits():
    """Prompt log-probabilities from one batched prefill against the fixture's float64 logits."""
    model, source = "trained-code-llama", "gguf/trained-code-llama-f16.gguf"
    m = load(model, source)
    man = manifest(model)
    p = next(p for p in man.get("logit_prompts") or man["prompts"] if len(p["ids"]) > 50)
    want_logits = np.load(FIXTURES / model / "ref" / f"logits_p{p['index']}.npy").astype(np.float64)
    want_logits -= want_logits.max(1, keepdims=True)
    want = (want_logits - np.log(np.exp(want_logits).sum(1, keepdims=True)))[np.arange(len(p["ids"]) - 1), p["ids"][1:]]
    got = m.score(p["ids"])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=0.02)
    ppl = m.perplexity(p["ids"])
    assert abs(ppl - np.exp(-want.mean())) / ppl < 0.01
    assert m.kv_cache.current_length == 0


def test_score_over_more_than_the_context():
    """Windows of `context` tokens, each from an empty cache: the same as scoring each alone."""
    m = load("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf", context=64)
    ids = m.tokenize("import os\nimport sys\n\n\ndef main(argv):\n    for arg in argv:\n        print(arg)\n" * 7)
    assert len(ids) > 130
    got = m.score(ids)
    assert got.shape == (len(ids) - 1,)
    np.testing.assert_allclose(got[:64], m.score(ids[:65]), atol=1e-5)
    np.testing.assert_allclose(got[64:128], m.score(ids[64:129]), atol=1e-5)
