"""The encoder-decoder's kernels (attention over spans of another buffer's rows with its softmax
weights, the Conv1d columns, row copies through indices) against float64 NumPy on odd sizes,
on both backends, with outputs poisoned with NaN first so that a row written where it must not
be, or not written, shows. Whisper's attention kernels likewise (the CPU backend runs the
per-row kernel behind the same entries): the encoder's attention inside windows in tiles of
query rows (window_attention), a decoder step's cross-attention split over chunks of keys
(span_split) with its softmax weights, and both inside the engine against the per-row kernel
(tuning whisper_attn=0:0)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import akunu
from akunu import _akunu, ops
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def dev(backend):
    return akunu.Device(backend)


def poisoned(device, shape):
    return device.upload(np.full(shape, np.nan, np.float32))


# Runs of consecutive rows on one span (beams of one window: the CPU backend's rows-at-once path
# for runs shorter than 8, blocks for 8 or more), head_dim not a multiple of 8 (its per-row path).
@pytest.mark.parametrize("n_heads, head_dim, rows, spans", [
    (1, 8, 3, [(0, 5), (2, 1), (4, 7)]),
    (3, 20, 4, [(0, 1), (7, 70), (1, 33), (70, 7)]),
    (3, 24, 9, [(4, 131)] * 5 + [(0, 1)] + [(2, 40)] * 3),
    (2, 64, 10, [(1, 1501)] * 7 + [(0, 3)] * 2 + [(5, 17)]),
    (2, 40, 9, [(3, 50)] * 8 + [(3, 50)]),
    (2, 20, 5, [(9, 61)] * 5),
])
def test_span_attention_over_kv_spans(dev, rng, n_heads, head_dim, rows, spans):
    width = n_heads * head_dim
    key_rows = max(s + n for s, n in spans)
    q = rng.standard_normal((rows, width + 3)).astype(np.float32)  # a wider q row: q_stride
    kv = rng.standard_normal((key_rows, 2 * width + 5)).astype(np.float32)
    k_off, v_off = 5, 5 + width
    seq = np.array(spans, np.uint32)
    longest = max(n for _, n in spans)
    out, weights = poisoned(dev, (rows, width)), poisoned(dev, (rows, n_heads, longest + 2))
    scale = 0.7 / math.sqrt(head_dim)
    ops.span_attention(dev.upload(q), dev.upload(kv), dev.upload(seq), out, n_heads, head_dim, k_off, v_off,
                       weights=weights, scale=scale)
    got, got_w = out.numpy(), weights.numpy()
    for r, (start, n) in enumerate(spans):
        for h in range(n_heads):
            qh = q[r, h * head_dim:(h + 1) * head_dim].astype(np.float64)
            k = kv[start:start + n, k_off + h * head_dim:k_off + (h + 1) * head_dim].astype(np.float64)
            v = kv[start:start + n, v_off + h * head_dim:v_off + (h + 1) * head_dim].astype(np.float64)
            s = k @ qh * scale
            p = np.exp(s - s.max())
            p /= p.sum()
            np.testing.assert_allclose(got[r, h * head_dim:(h + 1) * head_dim], p @ v, atol=2e-5)
            np.testing.assert_allclose(got_w[r, h, :n], p, atol=1e-6)
            assert np.isnan(got_w[r, h, n:]).all()  # past the span: not written


def test_span_attention_skip_rows_past_n_tokens(dev, rng):
    q = rng.standard_normal((4, 16)).astype(np.float32)
    kv = rng.standard_normal((6, 32)).astype(np.float32)
    out = poisoned(dev, (4, 16))
    ops.span_attention(dev.upload(q), dev.upload(kv), dev.upload(np.array([[0, 6]] * 4, np.uint32)), out, 2, 8, 0, 16,
                       n_tokens=3)
    got = out.numpy()
    assert np.isfinite(got[:3]).all() and np.isnan(got[3]).all()


def conv_columns(x, kernel, stride, pad, t_out):
    """x [windows, channels, t_in] -> [windows * t_out, channels * kernel], as torch's conv1d sees it."""
    windows, channels, t_in = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad)))
    cols = np.empty((windows, t_out, channels, kernel), np.float32)
    for t in range(t_out):
        cols[:, t] = padded[:, :, t * stride:t * stride + kernel]
    return cols.reshape(windows * t_out, channels * kernel)


@pytest.mark.parametrize("windows, channels, t_in, stride, time_major", [(1, 3, 7, 1, False), (2, 5, 9, 2, True),
                                                                          (3, 4, 10, 2, False)])
def test_conv_gather_is_im2col(dev, rng, windows, channels, t_in, stride, time_major):
    """Both layouts Whisper uses: mel frames channel-major [channels, t] (conv1), conv1's output
    time-major [t, channels] (conv2)."""
    x = rng.standard_normal((windows, channels, t_in)).astype(np.float32)
    kernel, pad = 3, 1
    t_out = (t_in + 2 * pad - kernel) // stride + 1
    stored = np.ascontiguousarray(x.transpose(0, 2, 1) if time_major else x)
    c_stride, t_stride = (1, channels) if time_major else (t_in, 1)
    out = poisoned(dev, (windows * t_out, channels * kernel))
    ops.conv_gather(dev.upload(stored), out, channels, kernel, stride, pad, t_in, t_out, channels * t_in, c_stride,
                    t_stride)
    np.testing.assert_array_equal(out.numpy(), conv_columns(x, kernel, stride, pad, t_out))


def test_conv_gather_then_gemm_is_conv1d(dev, rng):
    x = rng.standard_normal((1, 6, 11)).astype(np.float32)
    w = rng.standard_normal((5, 6, 3)).astype(np.float32)
    cols = poisoned(dev, (11, 18))
    ops.conv_gather(dev.upload(x), cols, 6, 3, 1, 1, 11, 11, 66, 11, 1)
    y = poisoned(dev, (11, 5))
    ops.gemm(dev.upload(w.reshape(5, 18)), cols, y, coopmat=False)  # f32 operands: atol 1e-4 holds everywhere
    padded = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1)))
    want = np.stack([(w * padded[None, :, t:t + 3]).sum((1, 2)) for t in range(11)])
    np.testing.assert_allclose(y.numpy(), want, atol=1e-4)


def test_copy_rows_through_indices(dev, rng):
    src = rng.standard_normal((7, 13)).astype(np.float32)
    dst0 = rng.standard_normal((9, 11)).astype(np.float32)
    src_rows = np.array([6, 0, 3, 3], np.uint32)
    dst_rows = np.array([8, 2, 0, 5], np.uint32)
    dst = dev.upload(dst0)
    ops.copy_rows(dev.upload(src), dev.upload(src_rows), dst, dev.upload(dst_rows), n_tokens=3)
    want = dst0.copy()
    want[dst_rows[:3]] = src[src_rows[:3], :11]
    np.testing.assert_array_equal(dst.numpy(), want)  # row 5 (past n_tokens) untouched


# ---- Whisper's attention: tiles of query rows, and the cross-attention split over keys ----------
def softmax_rows(s):
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


# (heads, head_dim, window, windows, windows run, tile rows): rows never a multiple of the tile,
# key blocks of 2048 / head_dim rows never a multiple of the window; head sizes that give teams
# of 8, 4 and 2 lanes (64, 16, 24) and the largest (256, blocks of 8 keys); tile 0: the device's.
@pytest.mark.parametrize("n_heads, head_dim, window, windows, run, tile_rows", [
    (2, 16, 37, 3, 3, 0),
    (3, 64, 45, 2, 1, 16),
    (1, 24, 33, 2, 2, 5),
    (2, 64, 70, 1, 1, 32),
    (1, 256, 19, 2, 2, 8),
])
def test_window_attention_stays_inside_each_window(dev, rng, n_heads, head_dim, window, windows, run, tile_rows):
    width, rows = n_heads * head_dim, window * windows
    qkv = rng.standard_normal((rows, 3 * width)).astype(np.float32)
    out = poisoned(dev, (rows, width))
    scale = 0.8 / math.sqrt(head_dim)
    ops.window_attention(dev.upload(qkv), out, n_heads, head_dim, window, tile_rows, scale, n_tokens=run * window)
    got = out.numpy()
    x = qkv.astype(np.float64)
    for w in range(run):
        rows_w = slice(w * window, (w + 1) * window)
        for h in range(n_heads):
            q, k, v = (x[rows_w, (i * n_heads + h) * head_dim:(i * n_heads + h + 1) * head_dim] for i in range(3))
            want = softmax_rows(q @ k.T * scale) @ v
            np.testing.assert_allclose(got[rows_w, h * head_dim:(h + 1) * head_dim], want, atol=2e-5)
    assert np.isnan(got[run * window:]).all()  # windows past n_tokens: not written


def test_window_attention_refuses_a_partial_window(dev, backend):
    if backend == "cpu":
        pytest.skip("the CPU backend runs the per-row kernel, which takes any rows")
    qkv = dev.upload(np.zeros((10, 48), np.float32))
    with pytest.raises(akunu.Error, match="whole number of windows of 4"):
        ops.window_attention(qkv, dev.upload(np.zeros((10, 16), np.float32)), 2, 8, 4)


# (heads, head_dim, spans (start, len) per row, rows run, chunk keys): spans not a multiple of
# the chunk, a span of one key, one shorter than a chunk, rows sharing a span (beams of one
# window); chunk 0: the device's.
@pytest.mark.parametrize("n_heads, head_dim, spans, run, chunk_keys", [
    (2, 16, [(0, 150), (150, 150), (0, 150)], 3, 32),
    (3, 20, [(5, 101), (0, 1), (40, 7), (9, 64)], 4, 24),
    (1, 64, [(0, 300), (300, 299)], 1, 40),
    (4, 8, [(3, 97), (100, 97)], 2, 0),
    (2, 64, [(0, 1500)], 1, 0),
])
def test_span_split_matches_softmax_and_weights(dev, rng, n_heads, head_dim, spans, run, chunk_keys):
    width, rows = n_heads * head_dim, len(spans)
    key_rows = max(s + n for s, n in spans)
    longest = max(n for _, n in spans)
    q = rng.standard_normal((rows, width + 3)).astype(np.float32)  # a wider q row: q_stride
    kv = rng.standard_normal((key_rows, 2 * width + 5)).astype(np.float32)
    k_off, v_off = 5, 5 + width
    out, weights = poisoned(dev, (rows, width)), poisoned(dev, (rows, n_heads, longest + 3))
    scale = 1.3 / math.sqrt(head_dim)
    ops.span_attention(dev.upload(q), dev.upload(kv), dev.upload(np.array(spans, np.uint32)), out, n_heads, head_dim,
                       k_off, v_off, weights=weights, scale=scale, n_tokens=run, chunk_keys=chunk_keys)
    got, got_w = out.numpy(), weights.numpy()
    for r, (start, n) in enumerate(spans[:run]):
        for h in range(n_heads):
            qh = q[r, h * head_dim:(h + 1) * head_dim].astype(np.float64)
            k = kv[start:start + n, k_off + h * head_dim:k_off + (h + 1) * head_dim].astype(np.float64)
            v = kv[start:start + n, v_off + h * head_dim:v_off + (h + 1) * head_dim].astype(np.float64)
            p = softmax_rows(k @ qh * scale)
            np.testing.assert_allclose(got[r, h * head_dim:(h + 1) * head_dim], p @ v, atol=2e-5)
            np.testing.assert_allclose(got_w[r, h, :n], p, atol=1e-6, rtol=1e-4)
            assert np.isnan(got_w[r, h, n:]).all()  # past the span: not written
    assert np.isnan(got[run:]).all() and np.isnan(got_w[run:]).all()  # rows past n_tokens


def test_span_split_runs_again_on_the_same_partials(dev, rng, backend):
    """The arrival counters are left at zero: a second dispatch over the same partial buffer
    (as every decoder step replays it) merges again."""
    q = rng.standard_normal((2, 32)).astype(np.float32)
    kv = rng.standard_normal((90, 64)).astype(np.float32)
    seq = dev.upload(np.array([[0, 90], [10, 77]], np.uint32))
    partial = dev.upload(np.zeros(_akunu.kernels.span_partial_floats(2, 2, 16), np.float32))
    outs = []
    for _ in range(3):
        out, w = poisoned(dev, (2, 32)), poisoned(dev, (2, 2, 90))
        cl = _akunu.CommandList(dev)
        cl.begin()
        _akunu.kernels.span_attention_split(cl, dev.upload(q), dev.upload(kv), seq,
                                            dev.upload(np.array([0, 0, 2, 0], np.uint32)), out, 2, 16, 2, 32, 64,
                                            0, 32, 32, 0.25, w, 90, partial, 16)
        cl.end()
        cl.submit()
        cl.wait()
        outs.append((out.numpy(), w.numpy()))
    for o, w in outs[1:]:
        np.testing.assert_array_equal(o, outs[0][0])
        np.testing.assert_array_equal(w, outs[0][1])
    assert np.isfinite(outs[0][0]).all()
    np.testing.assert_allclose(np.nansum(outs[0][1], -1), 1.0, atol=1e-5)
    if backend != "cpu":  # the CPU backend runs the per-row kernel, which leaves the partials alone
        assert not partial.numpy().view(np.uint32)[:4].any()  # the counters


@pytest.fixture(scope="module")
def models(backend):
    """The random fixture model with the tiled and split kernels (the default) and with the
    per-row kernel everywhere (tuning whisper_attn=0:0), each with two windows encoded."""
    path = str(require("whisper") / "tiny-whisper-random" / "hf")
    mel = np.load(require("whisper") / "tiny-en" / "jfk_mel.npy")
    pair = {}
    for name, tuning in (("new", None), ("per_row", {"whisper_attn": "0:0"})):
        m = _akunu.WhisperModel.load(path, max_sequences=2, tuning=tuning)
        pair[name] = (m, m.encode(np.stack([mel, mel[:, ::-1].copy()])))
    return pair


def test_engine_attention_matches_the_per_row_kernel(models, backend):
    """The encoder's windows and a step's cross-attention weights (the view word timestamps
    read) agree with the per-row kernel's; on Vulkan the tables run the new kernels."""
    (new, enc_new), (old, enc_old) = models["new"], models["per_row"]
    np.testing.assert_allclose(enc_new, enc_old, atol=5e-5, rtol=1e-5)
    logits = {}
    for name, m in (("new", new), ("old", old)):
        for seq in range(2):
            m.reset(seq)
            m.set_audio(seq, seq)
        m.decode([0, 1], [[50257, 50362, 440], [50257, 50362]])
        logits[name] = m.decode([0, 1], [[503], [440]])
        weights = [m.cross_attention(layer).copy() for layer in range(2)]
        logits[name + "_w"] = weights
    np.testing.assert_allclose(logits["new"], logits["old"], atol=5e-5, rtol=1e-5)
    for w_new, w_old in zip(logits["new_w"], logits["old_w"]):
        assert w_new.shape == (2, 4, 1500)
        np.testing.assert_allclose(w_new, w_old, atol=1e-6, rtol=1e-4)
        np.testing.assert_allclose(w_new.sum(-1), 1.0, atol=1e-5)
    kernels_new = {r["kernel"] for r in new.profile("decoder")} | {r["kernel"] for r in new.profile("encoder")}
    kernels_old = {r["kernel"] for r in old.profile("decoder")} | {r["kernel"] for r in old.profile("encoder")}
    assert {"window_attention", "span_split"}.isdisjoint(kernels_old)
    if backend == "cpu":
        assert kernels_new == kernels_old  # the CPU backend keeps its per-row kernels
    else:
        assert {"window_attention", "span_split"} <= kernels_new
