"""Quantized KV caches (kv_dtype q8, int4, fp4, int4h, fp4h), and with a recent window ("int4h+w8").

- The cache write against an independent NumPy quantizer (support/kv_reference.py) applied to the K and
  V of a float64 forward pass and to transformers' K/V of the reference fixtures.
- Attention, decode and prefill, against a float64 forward pass whose attention reads the very
  codes and scales akunu stored (decoded by kv_reference, not by akunu): what is left is the
  kernels' arithmetic, so the tolerance is the f16 one. Rounding flips between akunu's f32 K
  and NumPy's f64 K would otherwise dominate a 4-bit comparison.
- Views, the memory plan and bad input.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu
from support import kv_reference as ref
from support.fixture_paths import require
from support.int8_x import INT8_X_ALLOWANCE_RANDOM, decode_rounds_x

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

FORMATS = ["q8", "int4", "fp4", "q8/int4", "q8/fp4", "int4h", "fp4h"]
# With a recent window in f16 (odd windows; chain=1 keeps the rings at window + 2 rows, so that
# they wrap over IDS).
RECENT = ["int4+w5", "int4h+w8", "q8/fp4+w3", "fp4+w1"]
# 13 ids of the trained model's 4096 (odd count, BOS first).
IDS = [4092, 475, 1234, 99, 17, 300, 5, 12, 77, 8, 901, 33, 2047]


def trained_gguf():
    return require("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")


@pytest.fixture(scope="module")
def numpy_model():
    pytest.importorskip("gguf", reason="gguf-py reads the weights for the independent reference")
    from support.numpy_llama import NumpyLlama
    return NumpyLlama(str(trained_gguf()))


def sides(fmt: str) -> tuple[str, str]:
    """The formats of K and V ("q8/int4": q8 keys, int4 values)."""
    k, _, v = fmt.partition("+")[0].partition("/")
    return k, v or k


def window(fmt: str) -> int:
    """The recent window of a format ("int4h+w8": 8; 0 without one)."""
    return int(fmt.partition("+w")[2] or 0)


def cache_contents(m: akunu.Model, fmt: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer, (K, V) as [T, n_kv, head_dim] float64, decoded from the stored codes and scales."""
    kv = m.kv_cache
    kf, vf = sides(fmt)
    out = []
    for layer in range(m.config.n_layers):
        k = ref.unrotate(ref.dequantize(ref.unpack(kv.k(layer), kf), kv.k_scales(layer)), kf)
        v = ref.unrotate(ref.dequantize(ref.unpack(kv.v(layer), vf), kv.v_scales(layer)), vf)
        out.append((k.transpose(1, 0, 2), v.transpose(1, 0, 2)))
    return out


def within_one_code(got: np.ndarray, want: np.ndarray, scale: np.ndarray, fmt: str, what: str) -> None:
    """Codes agree except where akunu's f32 and the reference's value straddle a rounding
    boundary; there they differ by one code step (fp4's widest step is 2 at magnitude 4..6)."""
    step = scale.astype(np.float64)[..., None] * (2.0 if fmt in ("fp4", "fp4h") else 1.0)
    diff = np.abs(got - want)
    assert (diff <= step * 1.001 + 1e-6).all(), f"{fmt} {what}: a value is more than one code step off"
    exact = np.isclose(got, want, rtol=0, atol=1e-6).mean()
    assert exact >= 0.99, f"{fmt} {what}: only {exact:.4f} of the codes agree with the reference quantizer"


@pytest.mark.parametrize("fmt", FORMATS + RECENT[:1])
def test_cache_write_matches_numpy_quantizer(numpy_model, fmt):
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype=fmt)
    m.kv_cache.k(0)[...] = 0x5A5A5A5A  # poison: the write must replace every word it owns
    m.eval(IDS)
    assert m.kv_cache.dtype == fmt
    stored = cache_contents(m, fmt)
    captured = []

    def read_then_use_akunus(layer, k, v):
        # The reference's attention reads akunu's cache, so each layer's input matches akunu's
        # (a 4-bit rounding flip in layer 0 would otherwise move every later layer's K and V).
        captured.append((k, v))
        return stored[layer]

    numpy_model.logits(IDS, kv_hook=read_then_use_akunus, recent=window(fmt))
    for layer, (k_ref, v_ref) in enumerate(captured):
        for name, got_words, got_scales, x, f in (
                ("K", m.kv_cache.k(layer), m.kv_cache.k_scales(layer), k_ref, sides(fmt)[0]),
                ("V", m.kv_cache.v(layer), m.kv_cache.v_scales(layer), v_ref, sides(fmt)[1])):
            codes, scales = ref.quantize(x.transpose(1, 0, 2), f)  # [n_kv, T, head_dim]
            np.testing.assert_allclose(got_scales.astype(np.float64), scales.astype(np.float64), rtol=2e-3,
                                       err_msg=f"{fmt} layer {layer} {name} scales")
            # A row whose max|x| / qmax lies at an f16 rounding boundary may take the neighbouring
            # scale (akunu's f32 against the reference's float64); its codes are then compared
            # with the reference's codes under that scale. Such rows must stay rare.
            flipped = got_scales != scales
            assert flipped.mean() <= 0.05, f"{fmt} layer {layer} {name}: {flipped.sum()} row scales differ"
            if flipped.any():
                codes_at, _ = ref.quantize(x.transpose(1, 0, 2), f, scale=np.asarray(got_scales))
                codes = np.where(flipped[..., None], codes_at, codes)
                scales = np.where(flipped, got_scales, scales)
            within_one_code(ref.dequantize(ref.unpack(got_words, f), got_scales), ref.dequantize(codes, scales),
                            scales, f, f"{fmt} layer {layer} {name}")


@pytest.mark.parametrize("fmt", FORMATS + RECENT)
@pytest.mark.parametrize("path", ["prefill", "decode"])
def test_attention_over_quantized_cache_matches_float64(numpy_model, fmt, path):
    """A recent window's queries read their latest keys and values as the layer computed them
    (f16) and older ones from the same codes: the reference's attention does the same."""
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype=fmt, prefill_chunk=8, chain=1)
    if path == "prefill":  # two chunks: 8 tokens, then 5 that attend across the chunk boundary
        got = m._engine.eval(IDS, True)
    else:
        got = np.stack([m.eval([i], reset=False).copy() for i in IDS])
    stored = cache_contents(m, fmt)
    want = numpy_model.logits(IDS, kv_hook=lambda layer, k, v: stored[layer], recent=window(fmt))
    unquantized = numpy_model.logits(IDS)
    err = np.abs(got - want).max()
    assert err <= 0.05, f"{fmt} {path}: max |dlogit| {err:.4f} against float64 attention over the same cache"
    # The comparison can tell: the quantization moves the logits by more than the tolerance, and
    # so does the window (against the same cache read without one).
    if fmt != "q8":
        assert np.abs(got - unquantized).max() > 0.2, f"{fmt}: logits look unquantized"
    if window(fmt):
        without = numpy_model.logits(IDS, kv_hook=lambda layer, k, v: stored[layer])
        assert np.abs(got - without).max() > 0.2, f"{fmt}: logits look as if the window were not read"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("model", ["tiny-qwen3-random", "tiny-gemma3-random"])
def test_cache_write_matches_transformers_kv(model, fmt):
    """head_dim 128 (qwen3), (1+w) k_norm (gemma3): layer 0's K/V of prompt 0 from transformers'
    cache, quantized by the reference, against what akunu stored. (Later layers see the
    quantized cache's attention in akunu, transformers' exact one in the fixture.)"""
    d = require(model)
    manifest = json.loads((d / "manifest.json").read_text())
    ids = manifest["prompts"][0]["ids"]
    m = akunu.Model(require(model, "gguf", f"{model}-f16.gguf"), context=256, progress=False, kv_dtype=fmt)
    m.eval(ids)
    for layer in [0]:
        for name, words, scales_got, f in (("k", m.kv_cache.k(layer), m.kv_cache.k_scales(layer), sides(fmt)[0]),
                                           ("v", m.kv_cache.v(layer), m.kv_cache.v_scales(layer), sides(fmt)[1])):
            x = np.load(d / "ref" / f"{name}_p0_l{layer}.npy")  # [n_kv, T, head_dim]; NeoX order as GGUF
            codes, scales = ref.quantize(x, f)
            np.testing.assert_allclose(scales_got.astype(np.float64), scales.astype(np.float64), rtol=5e-3)
            # transformers ran in float64; akunu's prefill GEMM may take f16 inputs (cooperative
            # matrices): beside one code step, allow the fixtures' f16 KV tolerance, 2e-3 of
            # the row's largest value (twice that: either side of a boundary).
            got = ref.dequantize(ref.unpack(words, f), scales_got)
            step = scales.astype(np.float64)[..., None] * (2.0 if f in ("fp4", "fp4h") else 1.0)
            slack = 4e-3 * np.abs(ref.unrotate(x, f)).max(axis=-1, keepdims=True)  # the stored (rotated) row's
            err = np.abs(got - ref.dequantize(codes, scales)) - step * 1.01 - slack
            assert (err <= 0).all(), f"{model} {fmt} {name}{layer}: {err.max():.5f} beyond one step"


@pytest.mark.parametrize("fmt", ["f16", *FORMATS, "int4h+w8"])
def test_a_prompts_chunks_change_neither_its_logits_nor_its_cache(fmt):
    """A prompt of 61 ids in chunks of 7 (edges inside GEMM and attention tiles, a recent window
    wrapped) gives the logits and the stored cache words of the same prompt in one chunk, bit for
    bit: each row's products and attention do not depend on where the chunk edges fall, and a
    chunk attends to its own keys as the cache holds them (quantized), as later chunks will. So
    where a quantized cache scores a sequence differently, the difference is in what was stored
    (decode steps compute K and V in the GEMV: bench/NOTES.md, "Why a quantized cache written by
    decode steps scores differently from one written by a prompt"), not in the chunking."""
    gguf = trained_gguf()
    one = akunu.Model(gguf, context=128, progress=False, kv_dtype=fmt)
    if one.device.profile["gemm_coopmat"]:
        pytest.skip("cooperative-matrix GEMMs take other tiles for chunks of other lengths (another order "
                    "of the sums); test_engine.py's test_prefill_chunks_equal_decode_steps bounds that")
    sevens = akunu.Model(gguf, context=128, progress=False, kv_dtype=fmt, prefill_chunk=7)
    ids = [int(i) for i in np.random.default_rng(1).integers(3, 4000, size=61)]
    np.testing.assert_array_equal(sevens.eval(ids, all_logits=True), one.eval(ids, all_logits=True))
    for layer in range(one.config.n_layers):
        np.testing.assert_array_equal(sevens.kv_cache.k(layer), one.kv_cache.k(layer), err_msg=f"K{layer}")
        np.testing.assert_array_equal(sevens.kv_cache.v(layer), one.kv_cache.v(layer), err_msg=f"V{layer}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_long_prompt_over_sliding_window_agrees_between_prefill_and_decode(fmt):
    """gemma3's sliding layers (window 32) over a 129-token prompt: the decode kernel, run at a
    position after rewinding a prefilled cache, reads the rows the prefill kernel read and must
    give its logits. (Decoding the whole prompt instead would store slightly different K,
    GEMV against GEMM, and 4-bit codes would flip.)"""
    d = require("tiny-gemma3-random")
    ids = json.loads((d / "manifest.json").read_text())["prompts"][3]["ids"]
    gguf = require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-q8_0.gguf")
    m = akunu.Model(gguf, context=256, progress=False, kv_dtype=fmt, prefill_chunk=48)
    prefill = m._engine.eval(ids, True)
    # The decode step rewrites row t from a GEMV where the prefill used a GEMM (f16 inputs with
    # cooperative matrices): a 4-bit code of that one row may flip, so 4-bit values get more room;
    # and where the decode GEMVs round x to int8, the allowance for that (int8_x.py).
    tol = (0.05 if fmt == "q8" else 0.25) + (INT8_X_ALLOWANCE_RANDOM[0] if decode_rounds_x(m, "q8_0") else 0.0)
    for t in (31, 32, 47, 48, 100, len(ids) - 1):
        m.kv_cache.truncate(t)
        got = m.eval([ids[t]], reset=False)
        assert np.abs(got - prefill[t]).max() <= tol, f"position {t}"
        m.eval(ids[t + 1:], reset=False) if t + 1 < len(ids) else None


def test_dequantize_view_agrees_with_reference_decoder():
    m = akunu.Model(trained_gguf(), context=32, progress=False, kv_dtype="fp4")
    m.eval(IDS)
    kv = m.kv_cache
    want = ref.dequantize(ref.unpack(kv.v(2), "fp4"), kv.v_scales(2))
    np.testing.assert_array_equal(kv.v(2, dequantize=True), want.astype(np.float32))
    assert kv.k(1).dtype == np.uint32 and kv.k(1).shape == (2, len(IDS), 64 * 4 // 32)
    assert kv.k_scales(1).dtype == np.float16 and kv.k_scales(1).shape == (2, len(IDS))
    f16 = akunu.Model(trained_gguf(), context=32, progress=False)
    f16.eval(IDS)
    assert f16.kv_cache.k(0, dequantize=True).dtype == np.float32
    with pytest.raises(akunu.Error, match="no row scales"):
        f16.kv_cache.k_scales(0)


@pytest.mark.parametrize("fmt, row_bytes", [("f16", 128 + 128), ("q8", 66 + 66), ("int4", 34 + 34), ("fp4", 34 + 34),
                                            ("q8/int4", 66 + 34), ("q8/fp4", 66 + 34),
                                            ("int4h", 34 + 34), ("fp4h", 34 + 34), ("int4h+w8", 34 + 34),
                                            ("q8/int4+w", 66 + 34)])
def test_memory_report_counts_each_format_exactly(fmt, row_bytes):
    m = akunu.Model(trained_gguf(), context=40, progress=False, kv_dtype=fmt, chain=3)
    planned, allocated = m.memory_report()["kv_cache"]
    # A recent window's rings: window + 2 chains of f16 K and V rows per layer and KV head.
    recent = window(fmt.replace("+w", "+w8")) if fmt.endswith("+w") else window(fmt)
    ring_rows = recent + 2 * 3 if recent else 0
    assert m.memory_report()["kv_recent"] == {"window": recent, "rows": ring_rows, "bytes": 6 * 2 * 2 * ring_rows * 128}
    # 6 layers x 2 kv heads x 40 positions x (K row + V row bytes: codes + f16 scale)
    assert planned == allocated == 6 * 2 * 40 * row_bytes + 6 * 2 * 2 * ring_rows * 128
    plan = akunu.plan(trained_gguf(), context=40, kv_dtype=fmt, max_chain=3, check_device=False)
    assert plan.kv_bytes == planned


def test_rewind_and_continue_is_exact_on_a_quantized_cache():
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="int4")
    m.eval(IDS)
    first = m.eval([42], reset=False).copy()
    m.kv_cache.truncate(len(IDS) - 3)
    m.eval(IDS[-3:], reset=False)
    np.testing.assert_array_equal(m.eval([42], reset=False), first)
    with pytest.raises(akunu.Error, match="truncate"):
        m.kv_cache.truncate(len(IDS) + 5)


@pytest.mark.parametrize("fmt", ["int4", "q8/int4", "int4h", "int4h+w8"])
def test_decode_folds_rope_into_the_qkv_gemv_over_a_quantized_cache(fmt):
    """On a Vulkan device a decode step's Q/K/V GEMV applies RoPE for every cache, with no
    rope_only dispatch after it. The step's own row is then packed by the attention that reads it
    (attention_split's _pack variant) in every format; a recent window's copy is written after
    attention, by kv_recent_store."""
    if not any(d["backend"] == "vulkan" for d in akunu.devices()):
        pytest.skip("no Vulkan device: the CPU backend runs RoPE as a kernel of its own")
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype=fmt, device="vulkan")
    kernels = [d["kernel"] for d in m.dispatch_table()]
    layers = m.config.n_layers
    assert not any(k.startswith("rope") for k in kernels), kernels
    assert not any(k.startswith("kv_store") for k in kernels), kernels
    attention = [k for k in kernels if k.startswith("attention_split")]
    assert len(attention) == layers and all(k.endswith("_pack") for k in attention), attention
    assert sum(k == "kv_recent_store" for k in kernels) == (layers if "+w" in fmt else 0)
    # The rotated format's rotation of Q, K and V still runs before attention; the attention
    # rotates its output back itself (kernel_policy.h attention_unrotates).
    assert sum(k == "hadamard_rows" for k in kernels) == (layers if fmt.startswith("int4h") else 0)


def test_unknown_kv_dtype_is_refused():
    with pytest.raises(akunu.Error, match="unknown kv_dtype 'int3'; expected f16, q8, int4, fp4, q8/int4, .* int4h"):
        akunu.Model(trained_gguf(), context=32, progress=False, kv_dtype="int3")


def test_state_round_trip_and_fork_on_a_quantized_cache():
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="fp4")
    m.eval(IDS)
    saved = m.save_state()
    child = m.fork()
    want = [m.eval([t], reset=False).copy() for t in (5, 6, 7)]
    np.testing.assert_array_equal(np.stack([child.eval([t], reset=False).copy() for t in (5, 6, 7)]), np.stack(want))
    m.reset()
    m.eval([4092, 1, 2])
    m.load_state(saved)
    np.testing.assert_array_equal(m.kv_cache.k_scales(3), child.kv_cache.k_scales(3)[:, : len(IDS)])
    np.testing.assert_array_equal(np.stack([m.eval([t], reset=False).copy() for t in (5, 6, 7)]), np.stack(want))
    other = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="int4")
    with pytest.raises(akunu.Error, match="'fp4' KV cache, this model's is 'int4'"):
        other.load_state(saved)


@pytest.mark.parametrize("fmt", ["int4h", "fp4h"])
def test_rotated_view_rotates_back_and_the_state_keeps_its_format(fmt):
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype=fmt)
    m.eval(IDS)
    kv = m.kv_cache
    for layer, values in ((1, False), (4, True)):
        words, scales = (kv.v(layer), kv.v_scales(layer)) if values else (kv.k(layer), kv.k_scales(layer))
        want = ref.unrotate(ref.dequantize(ref.unpack(words, fmt), scales), fmt)
        got = kv.v(layer, dequantize=True) if values else kv.k(layer, dequantize=True)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    # The rotated codes are not the unrotated format's view of the same rows: the view must
    # rotate back.
    assert np.abs(akunu.dequantize_kv(kv.k(1), kv.k_scales(1), fmt[:-1]) - kv.k(1, dequantize=True)).max() > 0.1
    saved = m.save_state()
    want = m.eval([42], reset=False).copy()
    m.reset()
    m.load_state(saved)
    np.testing.assert_array_equal(m.eval([42], reset=False), want)
    other = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="int4")
    with pytest.raises(akunu.Error, match=f"'{fmt}' KV cache, this model's is 'int4'"):
        other.load_state(saved)


# int4h's perplexity cost on the corpus below, and its share of int4's: room over what the CPU
# backend, lavapipe and the H200 give (1.9 % and 0.50 on the H200, whose prefill GEMMs take f16
# operands; bench/NOTES.md, "Quantized decode attention 8 bytes a lane").
INT4H_PERPLEXITY_COST = 0.025
INT4H_SHARE_OF_INT4 = 0.6


def test_rotated_4bit_perplexity_is_closer_to_f16():
    """The trained code model over 4 windows of 256 tokens of this Python's standard library
    (akunu kv-quality's corpus): int4 and fp4 cost several percent of perplexity, int4h and fp4h
    about half of that or less, int4h with about half of int4's KL, and both rotated formats with their
    8 latest keys and values in f16 under 1 % (docs/kv-quality.md; fp4h+w8 reads ~0.8 % here on
    both backends)."""
    from akunu import kv_quality
    gguf = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    tok = akunu.Tokenizer.from_file(str(gguf))
    ids = kv_quality.python_corpus(tok, 1025, tok.bos_id, tok.eos_id)
    formats = ["int4", "int4h", "int4h+w8", "fp4", "fp4h", "fp4h+w8"]
    rows = {r.kv_dtype: r for r in kv_quality.measure(gguf, ids, formats, context=256, progress=False)}
    cost = {f: rows[f].perplexity / rows["f16"].perplexity - 1 for f in formats}
    assert cost["int4h"] <= INT4H_PERPLEXITY_COST, cost
    assert cost["int4h"] < INT4H_SHARE_OF_INT4 * cost["int4"], cost
    assert rows["int4h"].kl_mean < 0.6 * rows["int4"].kl_mean, cost
    assert rows["int4h"].kv_bytes <= 0.30 * rows["f16"].kv_bytes
    # The recent window takes most of int4h's KL away (a third of it is left on the 50,000-token
    # corpus: bench/NOTES.md), for rings of 8 + 2 chain f16 rows.
    assert cost["int4h+w8"] <= 0.01 and rows["int4h+w8"].kl_mean < 0.5 * rows["int4h"].kl_mean, cost
    m = akunu.Model(gguf, context=256, progress=False)
    ring_bytes = 6 * 2 * 2 * (8 + 2 * m.chain) * 64 * 2
    assert rows["int4h+w8"].kv_bytes == rows["int4h"].kv_bytes + ring_bytes
    assert cost["fp4h"] < 0.5 * cost["fp4"], cost
    assert cost["fp4h+w8"] <= 0.01 and rows["fp4h+w8"].kl_mean < 0.5 * rows["fp4h"].kl_mean, cost
    assert rows["fp4h+w8"].kv_bytes == rows["int4h+w8"].kv_bytes


def ring_rows_at(kv, layer: int, values: bool, positions) -> np.ndarray:
    """The recent window's f16 rows of `positions` [n_kv, len(positions), head_dim] (position t
    in ring row t % ring rows)."""
    ring = kv.recent_v(layer) if values else kv.recent_k(layer)
    return ring[:, [t % ring.shape[1] for t in positions]]


# The recent-window tests compare f16 ring rows and logits between kernels that must agree to
# about an f16 rounding; a GPU's cooperative-matrix prefill (GEMMs and attention on f16 operands)
# moves K and V by more than that, so they run with the f32-operand kernels there.
F32_OPERANDS = {"coopmat": False, "flash_coopmat": False}


def test_recent_window_prefill_logits_equal_decode_logits_across_rewinds():
    """int4h+w4 with chain 2: rings of 4 + 4 rows. Prefill's logits at every position against
    decoding the prompt, and against a decode step after rewinding to it: within 4 positions the
    rings still hold the window's rows (the kernels' arithmetic apart, the same logits); deeper,
    the rows the rings lost are rebuilt from the codes: the ring then holds exactly what the cache
    decodes to."""
    ids = IDS + [11, 22, 33, 44, 55, 66, 77, 88, 99, 100, 200, 300, 400, 500, 600, 700]
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="int4h+w4", chain=2, prefill_chunk=8,
                    tuning=F32_OPERANDS)
    prefill = m._engine.eval(ids, True)
    n = len(ids)
    # Every position decoded from an empty cache: the window reads the same f16 rows; older rows'
    # 4-bit codes may flip by a step where the decode GEMVs' K and V differ from the GEMM's in f32.
    decoded = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="int4h+w4", chain=2,
                          tuning=F32_OPERANDS)
    steps = np.stack([decoded.eval([i], reset=False).copy() for i in ids])
    assert np.abs(steps - prefill).max() <= 0.25 and np.abs(steps[:4] - prefill[:4]).max() <= 0.05
    for t in range(n - 4, n):  # rewinds of 1 to 4 positions
        m.kv_cache.truncate(t)
        err = np.abs(m.eval([ids[t]], reset=False) - prefill[t]).max()
        assert err <= 0.05, f"position {t}: max |dlogit| {err:.4f} after a rewind of {n - t}"
        m.eval(ids[t + 1:], reset=False) if t + 1 < n else None
    kv = m.kv_cache
    t = n - 11
    m.kv_cache.truncate(t)  # the rings have overwritten positions t - 3 .. t - 1
    lost = list(range(t - 3, t))
    for layer, values in ((0, False), (3, True), (5, False)):
        words, scales = (kv.v(layer), kv.v_scales(layer)) if values else (kv.k(layer), kv.k_scales(layer))
        decoded = ref.dequantize(ref.unpack(words, "int4"), scales)[:, lost]  # rotated, as the rings hold rows
        np.testing.assert_allclose(ring_rows_at(kv, layer, values, lost), decoded.astype(np.float16),
                                   rtol=0, atol=0, err_msg=f"layer {layer}: a rebuilt ring row")
    rebuilt = m.eval([ids[t]], reset=False)
    # The window's three older rows at 4 bits: the logits move (by about what int4h's cache moves
    # them), but far less than rows of other positions would.
    assert 0.01 < np.abs(rebuilt - prefill[t]).max() <= 3.0



@pytest.mark.parametrize("kv_alloc", ["full", "blocks"])
def test_a_deep_rewind_rebuilds_a_run_of_ring_rows_across_a_block_boundary(kv_alloc):
    """The rebuild reads a run of lost positions a head at a time: positions 253 to 259 lie on
    both sides of a block's end (256 rows) in a cache of blocks. Every rebuilt row of every layer
    and side is exactly what the cache's codes decode to."""
    m = akunu.Model(trained_gguf(), context=512, progress=False, kv_dtype="q8/int4+w8", chain=1, kv_alloc=kv_alloc)
    m.eval(np.random.default_rng(3).integers(0, m.config.vocab_size, 280).tolist())
    m.kv_cache.truncate(260)  # the rings (8 + 2 rows) held 270 to 279
    kv, lost = m.kv_cache, list(range(253, 260))
    for layer in range(m.config.n_layers):
        for values, fmt in ((False, "q8"), (True, "int4")):
            words, scales = (kv.v(layer), kv.v_scales(layer)) if values else (kv.k(layer), kv.k_scales(layer))
            decoded = ref.dequantize(ref.unpack(words, fmt), scales)[:, lost]
            np.testing.assert_array_equal(ring_rows_at(kv, layer, values, lost), decoded.astype(np.float16),
                                          err_msg=f"layer {layer} {'V' if values else 'K'}: a rebuilt ring row")


def test_recent_window_state_and_fork_continue_exactly():
    m = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="q8/int4+w3", chain=1)
    m.eval(IDS)
    window_rows = range(len(IDS) - 2, len(IDS))  # what the window of the next query reads
    held = ring_rows_at(m.kv_cache, 2, False, window_rows).copy()
    saved = m.save_state()
    child = m.fork()
    np.testing.assert_array_equal(ring_rows_at(child.kv_cache, 2, False, window_rows), held)
    want = np.stack([m.eval([t], reset=False).copy() for t in (5, 6, 7, 8)])
    np.testing.assert_array_equal(np.stack([child.eval([t], reset=False).copy() for t in (5, 6, 7, 8)]), want)
    m.eval([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])  # fills the rings with another sequence's positions 6 to 10
    m.load_state(saved)
    np.testing.assert_array_equal(ring_rows_at(m.kv_cache, 2, False, window_rows), held)
    # Rewound by one, the window reads position 10, which the state does not carry: it is rebuilt
    # from the codes, and the row the other sequence left in the ring must not pass for it.
    m.kv_cache.truncate(len(IDS) - 1)
    kv = m.kv_cache
    decoded = ref.dequantize(ref.unpack(kv.k(2), "q8"), kv.k_scales(2))[:, [10]]
    np.testing.assert_array_equal(ring_rows_at(kv, 2, False, [10]), decoded.astype(np.float16))
    m.load_state(saved)
    np.testing.assert_array_equal(np.stack([m.eval([t], reset=False).copy() for t in (5, 6, 7, 8)]), want)
    without = akunu.Model(trained_gguf(), context=64, progress=False, kv_dtype="q8/int4", chain=1)
    with pytest.raises(akunu.Error, match="bytes"):
        without.load_state(saved)


@pytest.mark.parametrize("name, error", [("f16+w4", "an f16 cache has none"), ("int4h+x4", "expected '<format>"),
                                         ("int4+w0", "1 to 256"), ("int4+w1000", "expected '<format>")])
def test_recent_window_spelling_errors(name, error):
    with pytest.raises(akunu.Error, match=error):
        akunu.Model(trained_gguf(), context=32, progress=False, kv_dtype=name)


def test_recent_window_names_and_batches():
    m = akunu.Model(trained_gguf(), context=32, progress=False, kv_dtype="fp4+w")
    assert m.kv_cache.dtype == "fp4+w8" and m.kv_cache.recent == 8 and m.kv_cache.side_dtype(True) == "fp4"
    assert akunu.plan(trained_gguf(), context=32, kv_dtype="int4h+w16", check_device=False).kv_recent_rows > 16
    # A batch keeps a ring per sequence (test_batch_recent.py checks what it computes).
    report = akunu.Batch(m, max_sequences=3).memory_report()
    rows = m.memory_report()["kv_recent"]["rows"]
    cfg = m.config
    assert report["recent_bytes"] == 3 * cfg.n_layers * 2 * cfg.n_kv_heads * rows * cfg.head_dim * 2


@pytest.mark.parametrize("fmt", ["int4h+w8", "q8/fp4+w3"])
def test_recent_window_backends_agree(fmt, backend):
    """This module's backend against the other one on the same prompt: a chunked prefill and
    three decode steps. Layer 0's K and V come from the embeddings alone, so its rings hold f16
    rows of the same f32 values on both backends: equal to an f16 step or two. Every later
    layer's K and V pass through attention over 4-bit codes of older rows, and a code can flip
    between the backends' f32 arithmetic (one code step, as test_long_prompt_... allows); that
    moves its rings' rows by up to a few percent of their largest value (GPUs that contract
    products differently show it), so deeper rings get that bound, which a wrong ring row (a
    different position or a stale row) still breaks by far."""
    if backend == "cpu":
        pytest.skip("compared once, from the Vulkan run")
    got = {}
    for device in ("vulkan", "cpu"):
        m = akunu.Model(trained_gguf(), context=64, device=device, kv_dtype=fmt, prefill_chunk=8, chain=1,
                        progress=False, tuning=F32_OPERANDS if device == "vulkan" else None)
        prefill = m._engine.eval(IDS, True)
        logits = np.concatenate([prefill, np.stack([m.eval([t], reset=False).copy() for t in (5, 6)])])
        rings = [r(layer).astype(np.float32).copy() for layer in (0, 2, 5)
                 for r in (m.kv_cache.recent_k, m.kv_cache.recent_v)]
        got[device] = logits, rings
    (lv, rings_v), (lc, rings_c) = got["vulkan"], got["cpu"]
    for i, (a, b) in enumerate(zip(rings_v, rings_c)):
        share = 1e-3 if i < 2 else 3e-2
        np.testing.assert_allclose(a, b, rtol=0, atol=share * float(np.abs(b).max()), err_msg=f"ring {i}")
    assert np.abs(lv - lc).max() <= 0.25, f"{fmt}: max |dlogit| {np.abs(lv - lc).max():.4f} between the backends"
