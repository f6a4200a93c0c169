"""The Whisper engine (_akunu.WhisperModel) on the random HF fixture model, on both backends:
the encoder output and the decoder logits against transformers' float32 forward pass
(tiny-whisper-random/ref), greedy steps, sequence slots (several slots in one step, copies,
truncation), the cross-attention and K/V read-backs, a batched encode, and the errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")

# f16 weights read back as float32 on both sides; the differences are float32 rounding in a
# different order (GEMM sums over 240 to 256 terms, softmax over 1500 keys, LayerNorm). Both
# outputs are of order 1 (encoder states up to about 3, logits up to about 2).


def tolerance(model, tight: float = 5e-5) -> dict:
    """Against float32 references: float32 throughout, except on a device whose GEMMs run on
    cooperative matrices, which round their operands to f16 (11-bit mantissas), so outputs
    move by about 1e-3 of their size there."""
    if model.device.profile["gemm_coopmat"]:
        return dict(atol=2e-3, rtol=2e-3)
    return dict(atol=tight, rtol=1e-5)

CLIPS = ("jfk", "weather")


@pytest.fixture(scope="module")
def fixture_dir():
    return require("whisper")


@pytest.fixture(scope="module")
def ref(fixture_dir):
    r = fixture_dir / "tiny-whisper-random" / "ref"
    ids = json.loads((r / "refs.json").read_text())
    return {clip: {"mel": np.load(fixture_dir / "tiny-en" / f"{clip}_mel.npy"),
                   "encoder": np.load(r / f"{clip}_encoder.npy"),
                   "logits": np.load(r / f"{clip}_decoder_logits.npy"),
                   "ids": ids[clip]["decoder_input_ids"]} for clip in CLIPS}


@pytest.fixture(scope="module")
def model(fixture_dir, backend):
    return _akunu.WhisperModel.load(str(fixture_dir / "tiny-whisper-random" / "hf"), max_sequences=4)


@pytest.fixture(scope="module")
def encoded(model, ref):
    """The weather clip alone, then both clips in one call (the encoder is the slow part on
    lavapipe, so each module encodes once)."""
    single = model.encode(ref["weather"]["mel"])
    return single, model.encode(np.stack([ref[c]["mel"] for c in CLIPS]))


@pytest.fixture
def audio(model, encoded):
    """Slot i attends to clip i of the batched encode; every slot is emptied."""
    for seq in range(model.max_sequences):
        model.reset(seq)
    for i in range(len(CLIPS)):
        model.set_audio(i, i)
    return encoded[1]


def test_config(model):
    c = model.config
    assert (c["n_mels"], c["n_audio_ctx"], c["n_text_ctx"], c["d_model"], c["n_vocab"]) == (80, 1500, 448, 64, 51864)
    assert (c["encoder_layers"], c["decoder_layers"], c["heads"]) == (2, 2, 4)
    assert (c["sot"], c["eos"], c["format"]) == (50257, 50256, "safetensors")
    assert c["begin_suppress_tokens"] == [220, 50256]
    assert 50362 in c["suppress_tokens"] or len(c["suppress_tokens"]) > 50  # from generation_config.json
    assert model.max_sequences == 4


def test_encoder_matches_transformers(model, ref, encoded):
    single, batch = encoded
    assert batch.shape == (2, 1500, 64) and batch.dtype == np.float32
    for i, clip in enumerate(CLIPS):
        np.testing.assert_allclose(batch[i], ref[clip]["encoder"], **tolerance(model), err_msg=clip)
    # One window alone gives what it gave in the batch.
    assert single.shape == (1, 1500, 64)
    np.testing.assert_array_equal(single[0], batch[1])


def test_decoder_logits_all_rows(model, ref, audio):
    ids = ref["jfk"]["ids"]
    logits = model.decode([0], [ids], all_logits=True)
    assert logits.shape == (len(ids), 51864)
    np.testing.assert_allclose(logits, ref["jfk"]["logits"], **tolerance(model))
    assert model.length(0) == len(ids)


@pytest.mark.parametrize("rows", [5, 32, 61])
def test_decode_is_the_same_however_the_threads_split_it(fixture_dir, ref, rows):
    """A fresh model runs its first decode's commands on the calling thread (the CPU backend
    has no timings yet), later ones shared among the threads: the logits are equal bit for bit
    (rows 5: a short run of rows on one audio span; 32 and 61: blocks of rows, the last one
    partial). On a GPU the same call twice."""
    m = _akunu.WhisperModel.load(str(fixture_dir / "tiny-whisper-random" / "hf"), max_sequences=1)
    m.encode(ref["jfk"]["mel"])
    ids = [50257 + (i % 3) if i < 3 else 220 + 7 * i for i in range(rows)]
    runs = []
    for _ in range(3):
        m.set_audio(0, 0)
        m.reset(0)
        runs.append(m.decode([0], [ids], all_logits=True))
    for later in runs[1:]:
        np.testing.assert_array_equal(later, runs[0])


def test_two_slots_step_by_step(model, ref, audio):
    """The prompt, then one token a step in two slots at once (rows of both in every GEMM):
    each slot's last-row logits match its own clip's reference."""
    prompt = 2
    out = model.decode([0, 1], [ref[c]["ids"][:prompt] for c in CLIPS])
    for i, clip in enumerate(CLIPS):
        np.testing.assert_allclose(out[i], ref[clip]["logits"][prompt - 1], **tolerance(model))
    for step in range(prompt, len(ref["jfk"]["ids"])):
        out = model.decode([1, 0], [[ref[c]["ids"][step]] for c in reversed(CLIPS)])
        for row, clip in zip(out, reversed(CLIPS)):
            np.testing.assert_allclose(row, ref[clip]["logits"][step], **tolerance(model))
    assert model.length(0) == model.length(1) == len(ref["jfk"]["ids"])


def test_greedy_steps_follow_the_reference(model, ref, audio):
    """Argmax decoding from the prompt gives the reference's greedy tokens wherever the
    reference's top-2 margin is clear of float32 reordering."""
    ids = ref["weather"]["ids"]
    tokens = list(ids[:2])
    logits = model.decode([1], [tokens])
    for step in range(2, len(ids)):
        want = ref["weather"]["logits"][step - 1]
        top2 = np.sort(want)[-2:]
        if top2[1] - top2[0] > 0.05:
            assert int(np.argmax(logits[0])) == int(np.argmax(want)), step
        tokens.append(ids[step])  # the reference's token, so that a flip cannot derail later steps
        logits = model.decode([1], [[ids[step]]])


def test_copy_truncate_reset(model, ref, audio):
    ids, want = ref["jfk"]["ids"], ref["jfk"]["logits"]
    model.decode([0], [ids[:6]])
    model.copy_sequence(0, 2)  # caches, length and audio
    assert model.length(2) == 6
    np.testing.assert_array_equal(model.kv(2, 1)[0], model.kv(0, 1)[0])
    out = model.decode([2, 0], [[ids[6]], [ids[6]]])
    np.testing.assert_allclose(out, np.stack([want[6], want[6]]), **tolerance(model))
    # Another branch in slot 2, then back to position 6 and the reference's token again.
    model.decode([2], [[ids[9], ids[3]]])
    model.truncate(2, 6)
    np.testing.assert_allclose(model.decode([2], [[ids[6]]])[0], want[6], **tolerance(model))
    model.reset(2)
    assert model.length(2) == 0
    np.testing.assert_allclose(model.decode([2], [ids[:3]])[0], want[2], **tolerance(model))
    # A copy takes the other slot's audio too.
    model.copy_sequence(1, 3)
    model.reset(3)
    np.testing.assert_allclose(model.decode([3], [ref["weather"]["ids"][:4]])[0], ref["weather"]["logits"][3],
                               **tolerance(model))


def test_a_decode_longer_than_one_submission(model, ref, audio, rng):
    """Two prompts of 300 tokens (more rows than one decoder submission holds) give the logits
    each gives alone; cross_attention then covers the last submission's rows."""
    assert model.decode_rows == 448
    prompts = [rng.integers(0, 50000, 300).tolist() for _ in range(2)]
    together = model.decode([0, 1], prompts)
    assert model.cross_attention(0).shape[0] == 600 - 448
    alone = []
    for seq in (0, 1):
        model.reset(seq)
        alone.append(model.decode([seq], [prompts[seq]])[0])
    np.testing.assert_allclose(together, np.stack(alone), **tolerance(model, 1e-5))
    assert model.length(0) == model.length(1) == 300


def test_cross_attention_and_kv_views(model, ref, audio):
    """The same tokens in three slots: two on jfk's audio, one on the weather's."""
    ids = ref["jfk"]["ids"][:3]
    model.set_audio(2, 0)
    model.decode([0, 1, 2], [ids, ids, ids])
    for layer in range(2):
        w = model.cross_attention(layer)
        assert w.shape == (9, 4, 1500) and w.dtype == np.float32
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-4)
        assert (w >= 0).all()
        np.testing.assert_allclose(w[6:9], w[0:3], atol=1e-7)  # same audio and tokens
        assert np.abs(w[3:6] - w[0:3]).max() > 1e-5  # other audio
    k, v = model.kv(0, 1)
    assert k.shape == v.shape == (4, 3, 16)
    np.testing.assert_allclose(model.kv(2, 1)[1], v, atol=1e-7)
    assert not np.array_equal(k, v)
    # Self-attention K and V depend on the tokens only in layer 0, on the audio from layer 1 on.
    np.testing.assert_allclose(model.kv(1, 0)[0], model.kv(0, 0)[0], atol=1e-7)
    assert np.abs(model.kv(1, 1)[0] - k).max() > 1e-5
    with pytest.raises(akunu.Error, match="layer 2 is out of range"):
        model.cross_attention(2)


def test_profiles_replay_the_last_calls_and_change_nothing(model, ref, audio, fixture_dir):
    """profile("encoder") / profile("decoder") time each command of the last encoder pass and
    decoder step by replaying them: the cache, the views and the next step are as without it."""
    ids = ref["jfk"]["ids"]
    model.decode([0, 1], [ids[:3], ids[:3]])
    model.decode([0], [[ids[3]]])
    k, v = (x.copy() for x in model.kv(0, 1))
    weights = model.cross_attention(1).copy()
    profiles = {what: model.profile(what) for what in ("encoder", "decoder")}
    for what, rows in profiles.items():
        assert rows and {"label", "kernel", "ms", "bytes_bound"} <= set(rows[0])
        assert all(np.isfinite(r["ms"]) and r["ms"] >= 0 for r in rows), what
        assert len(rows) == len(model.dispatch_table(what))
    labels = {r["label"] for r in profiles["decoder"]}
    assert any("cross" in label for label in labels) and any("self" in label for label in labels)
    np.testing.assert_array_equal(model.cross_attention(1), weights)
    np.testing.assert_array_equal(model.kv(0, 1)[0], k)
    np.testing.assert_array_equal(model.kv(0, 1)[1], v)
    assert model.length(0) == 4
    after = model.decode([0], [[ids[4]]])
    model.truncate(0, 4)
    np.testing.assert_array_equal(model.decode([0], [[ids[4]]]), after)
    fresh = _akunu.WhisperModel.load(str(fixture_dir / "tiny-whisper-random" / "hf"), max_sequences=1)
    with pytest.raises(akunu.Error, match="encode a window first"):
        fresh.profile("encoder")
    with pytest.raises(akunu.Error, match="decode a token first"):
        fresh.profile("decoder")
    with pytest.raises(akunu.Error, match='takes "encoder" or "decoder", not "mel"'):
        fresh.profile("mel")


def q8_0(w: np.ndarray) -> np.ndarray:
    """w [rows, k] rounded as Q8_0 blocks of 32 (ggml's quantize_row_q8_0): scale max|x| / 127
    kept as f16, codes round(x / scale) with the float32 scale, read back as f16 scale * code."""
    blocks = w.astype(np.float32).reshape(-1, 32)
    d = np.abs(blocks).max(-1, keepdims=True) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d > 0)
    return (np.rint(blocks * inv) * d.astype(np.float16).astype(np.float32)).reshape(w.shape)


def test_q8_head_rounds_only_the_text_rows(model, ref, audio, fixture_dir, backend):
    """tuning head_q8 (the CPU backend): the logits are the head, its text tokens' rows (ids
    below <|endoftext|>, in whole tiles of 32) rounded as Q8_0, times the same final hidden state
    x. The head has full column rank, so each row's x is the least-squares solution of the f16
    head's logits; the rounded head (in NumPy) times it gives head_q8's logits within x's
    rounding to 16 bits per block of 32 (half a step, max|x| / 32767, times the head's |weights|)
    and float32 sums, while the head's rounding moves the text logits far more. The special and
    timestamp tokens' logits stay as without head_q8. Other devices ignore the key: their logits
    are those without it, bit for bit."""
    from safetensors.numpy import load_file
    path = fixture_dir / "tiny-whisper-random" / "hf"
    q8 = _akunu.WhisperModel.load(str(path), max_sequences=1, tuning={"head_q8": 1})
    q8.encode(ref["jfk"]["mel"])
    q8.set_audio(0, 0)
    ids = ref["jfk"]["ids"]
    got = q8.decode([0], [ids], all_logits=True)
    base = model.decode([0], [ids], all_logits=True)
    if backend != "cpu":
        np.testing.assert_array_equal(got, base)
        return
    head = load_file(str(path / "model.safetensors"))["model.decoder.embed_tokens.weight"].astype(np.float64)
    text = q8.config["eos"] // 32 * 32
    x = np.linalg.lstsq(head, base.T.astype(np.float64), rcond=None)[0].T  # [rows, d_model]
    rounded = np.concatenate([q8_0(head[:text]), head[text:]])
    want = x @ rounded.T
    half_step = np.repeat(np.abs(x).reshape(len(ids), -1, 32).max(-1) / 32767 / 2, 32, axis=-1)
    bound = half_step @ np.abs(rounded).T + 1e-5 * np.abs(want).max()
    assert (np.abs(got - want) <= bound).all()
    assert np.abs(got - base)[:, :text].max() > 30 * bound.max()  # the text rows' rounding shows
    np.testing.assert_allclose(got[:, text:], base[:, text:], **tolerance(model))


def _encoder_in_numpy(w: dict, mel: np.ndarray, heads: int, rounded) -> np.ndarray:
    """Whisper's encoder in float64 over one window mel [n_mels, 2 T] with the weights w (HF
    names), each matrix that `rounded(name)` names rounded as Q8_0 (conv2 as [out, in * 3])."""
    from math import erf

    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / np.sqrt(2.0))))
    e = "model.encoder."

    def weight(name):
        m = w[name].astype(np.float64)
        return q8_0(m.reshape(m.shape[0], -1)).reshape(m.shape) if rounded(name) else m

    def conv(x, name, stride):  # x [in, frames] -> [out, frames / stride], kernel 3, padding 1
        k, padded = weight(e + name + ".weight"), np.pad(x, ((0, 0), (1, 1)))
        cols = np.stack([padded[:, j:j + x.shape[1]:stride] for j in range(3)], axis=-1)  # [in, t, 3]
        return gelu(np.einsum("oik,itk->ot", k, cols) + w[e + name + ".bias"].astype(np.float64)[:, None])

    def norm(x, name):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w[name + ".weight"].astype(np.float64) + w[name + ".bias"]

    def linear(x, name, bias=True):
        y = x @ weight(name + ".weight").T
        return y + w[name + ".bias"].astype(np.float64) if bias else y

    h = conv(conv(mel.astype(np.float64), "conv1", 1), "conv2", 2).T + w[e + "embed_positions.weight"]
    for layer in range(sum(k.endswith("fc1.weight") and k.startswith(e) for k in w)):
        p = f"{e}layers.{layer}."
        x = norm(h, p + "self_attn_layer_norm")
        q, k, v = (linear(x, p + "self_attn." + n, n != "k_proj") for n in ("q_proj", "k_proj", "v_proj"))
        split = [a.reshape(len(a), heads, -1).transpose(1, 0, 2) for a in (q, k, v)]
        s = split[0] @ split[1].transpose(0, 2, 1) / np.sqrt(split[0].shape[-1])
        a = np.exp(s - s.max(-1, keepdims=True))
        o = (a / a.sum(-1, keepdims=True)) @ split[2]
        h = h + linear(o.transpose(1, 0, 2).reshape(h.shape), p + "self_attn.out_proj")
        h = h + linear(gelu(linear(norm(h, p + "final_layer_norm"), p + "fc1")), p + "fc2")
    return norm(h, e + "layer_norm")


def test_q8_encoder_rounds_its_matrices(ref, fixture_dir, backend):
    """tuning encoder_q8 (the CPU backend): the encoder's projections, FFN and conv2 run as
    Q8_0 tiles rounded at load (conv1, whose rows of 3 x 80 are no whole blocks, as stored). The
    encoder states (up to about 3) match the encoder in float64 with those matrices rounded as
    Q8_0 in NumPy within 2e-4, where what is left is x's rounding to 16 bits per block of 32 and
    float32 sums, while the weights' rounding itself moves them more than 20 times that; a
    second encode, its GEMMs shared among threads, gives the same states. (With
    int8_gemm the same GEMMs round x to 8 bits, test_gemm_x8.py's kernel: there a code that
    float32 and float64 round apart moves a state by more than the rounding leaves elsewhere.)
    Other devices ignore the key: their states are those without it, bit for bit."""
    from safetensors.numpy import load_file
    path = fixture_dir / "tiny-whisper-random" / "hf"
    q8 = _akunu.WhisperModel.load(str(path), max_sequences=1, tuning={"encoder_q8": 1})
    mel = ref["jfk"]["mel"]
    got = q8.encode(mel)[0]
    if backend != "cpu":
        base = _akunu.WhisperModel.load(str(path), max_sequences=1)
        np.testing.assert_array_equal(got, base.encode(mel)[0])
        return
    assert "gemm_q8_0_t32" in {r["kernel"] for r in q8.dispatch_table("encoder")}
    # A command's first run goes whole to the calling thread; replays share the GEMMs' items
    # among the pool's threads (rows first: more rows than columns), with the same sums. (Another
    # clip in between: an item no share computed would keep that clip's values.)
    q8.encode(ref["weather"]["mel"])
    np.testing.assert_array_equal(q8.encode(mel)[0], got)
    w = load_file(str(path / "model.safetensors"))
    heads, matrices = q8.config["encoder_heads"], ("conv2.", "self_attn.", "fc1.", "fc2.")
    want = _encoder_in_numpy(w, mel, heads, lambda n: any(m in n for m in matrices))
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4)
    unrounded = _encoder_in_numpy(w, mel, heads, lambda n: False)
    np.testing.assert_allclose(unrounded, ref["jfk"]["encoder"], rtol=0, atol=1e-5)  # the reference's own check
    assert np.abs(got - unrounded).max() > 20 * 2e-4  # the weights' rounding shows


def test_decode_allocates_nothing(model, ref, audio):
    model.decode([0], [ref["jfk"]["ids"][:2]])
    before = model.device_allocations
    for t in ref["jfk"]["ids"][2:6]:
        model.decode([0, 1], [[t], [t]])
    model.copy_sequence(0, 2)
    model.set_audio(3, 1)
    assert model.device_allocations == before


def test_bad_input_is_refused(model, ref, audio, fixture_dir):
    fresh = _akunu.WhisperModel.load(str(fixture_dir / "tiny-whisper-random" / "hf"), max_sequences=1)
    with pytest.raises(akunu.Error, match="has no audio"):
        fresh.decode([0], [[50257]])
    with pytest.raises(akunu.Error, match="window 0 is not one of the 0 windows"):
        fresh.set_audio(0)
    with pytest.raises(akunu.Error, match="out of range for a vocabulary"):
        model.decode([0], [[51864]])
    with pytest.raises(akunu.Error, match="sequence 4 is out of range"):
        model.decode([4], [[1]])
    with pytest.raises(akunu.Error, match="listed twice"):
        model.decode([0, 0], [[1], [2]])
    with pytest.raises(akunu.Error, match="window 2 is not one of the 2 windows"):
        model.set_audio(0, 2)
    with pytest.raises(akunu.Error, match="80 bins and 3000 frames"):
        model.encode(np.zeros((80, 2999), np.float32))
    with pytest.raises(akunu.Error, match="1 to 4 windows"):
        model.encode(np.zeros((5, 80, 3000), np.float32))
    bad = np.zeros((2, 80, 3000), np.float32)
    bad[1, 3, 7] = np.inf  # would spread through the window's states into every sequence decoding it
    with pytest.raises(akunu.Error, match="mel value 9007 of window 1 is not finite"):
        model.encode(bad)
    with pytest.raises(akunu.Error, match="cannot keep 1"):
        model.truncate(0, 1)
    with pytest.raises(akunu.Error, match="takes 201 to"):
        model.mel(np.zeros(100, np.float32))
    with pytest.raises(akunu.Error, match="not finite"):
        model.mel(np.full(16000, np.nan, np.float32))
    with pytest.raises(akunu.Error, match="1-D"):
        model.mel(np.zeros((2, 16000), np.float32))
    assert model.length(0) == 0  # nothing ran


def test_plan_sizes_the_slots(fixture_dir):
    """akunu.plan() counts what WhisperModel.load allocates for max_sequences slots."""
    p = akunu.plan(fixture_dir / "tiny-whisper-random" / "hf", max_sequences=4, check_device=False)
    d, layers, ctx, audio = 64, 2, 448, 1500
    # Per slot and layer: self K|V for the text context, cross K|V, and a window's cross K|V.
    assert p.kv_bytes == 4 * layers * (ctx + 2 * audio) * 2 * d * 4
    assert dict(p.decode_scratch)["logits"] == ctx * 51864 * 4
    assert dict(p.prefill_scratch)["mel"] == 4 * 80 * 3000 * 4
    assert p.weights_bytes > 0
    assert p.total_bytes == p.weights_bytes + p.kv_bytes + p.decode_scratch_bytes + p.prefill_scratch_bytes


@pytest.mark.parametrize("tuning", [{}, {"head_q8": 1}, {"encoder_q8": 1}, {"head_q8": 1, "encoder_q8": 1}])
def test_plan_counts_the_q8_copies(fixture_dir, monkeypatch, tuning):
    """akunu.plan() for the CPU backend counts the weights as WhisperModel.load uploads them, to
    the byte: with tuning encoder_q8 the encoder's matrices and the cross-attention K and V as
    Q8_0 tiles (fewer bytes than the file's f16), with head_q8 a Q8_0 copy of the head's text
    rows beside the head (more)."""
    path = fixture_dir / "tiny-whisper-random" / "hf"
    monkeypatch.setenv("AKUNU_DEVICE", "cpu")
    plan = akunu.plan(path, device="cpu", max_sequences=1, tuning=tuning)
    assert plan.weights_bytes == _akunu.WhisperModel.load(str(path), max_sequences=1, tuning=tuning).weight_bytes
    plain = akunu.plan(path, device="cpu", max_sequences=1).weights_bytes
    if tuning == {"head_q8": 1}:
        assert plan.weights_bytes > plain
    if tuning == {"encoder_q8": 1}:
        assert plan.weights_bytes < plain


def test_plan_counts_the_greedy_chains(fixture_dir, backend):
    """akunu.plan() counts the greedy chain's buffers (whisper_chain_layout) as WhisperModel.load
    allocates them: loads with chains on and off differ by what their plans differ by, up to
    each buffer's alignment (none on the CPU backend, whose allocations are counted exactly)."""
    path = fixture_dir / "tiny-whisper-random" / "hf"
    slots, vocab = 3, 51864
    plans = {t: akunu.plan(path, max_sequences=slots, check_device=False, tuning={"whisper_chain": t}) for t in (0, 7)}
    assert not [n for n, _ in plans[0].decode_scratch if n.startswith("chain_")]
    chain = {n: b for n, b in plans[7].decode_scratch if n.startswith("chain_")}
    assert chain["chain_masks"] == slots * 2 * ((vocab + 31) // 32) * 4
    assert chain["chain_tokens"] == chain["chain_logprobs"] == slots * 7 * 4
    assert chain["chain_row_slot"] == slots * 4 and chain["chain_state"] > 0
    assert plans[7].total_bytes - plans[0].total_bytes == sum(chain.values())
    loaded = {t: _akunu.WhisperModel.load(str(path), max_sequences=slots, tuning={"whisper_chain": t})
              for t in (0, 7)}
    assert (loaded[0].chain_steps, loaded[7].chain_steps) == (0, 7)
    grown = loaded[7].device.allocated_bytes - loaded[0].device.allocated_bytes
    alignment = 0 if backend == "cpu" else 256
    assert 0 <= grown - sum(chain.values()) <= alignment * len(chain), (grown, chain)
