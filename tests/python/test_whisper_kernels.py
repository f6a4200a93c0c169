"""The encoder-decoder's kernels (attention over spans of another buffer's rows with its softmax
weights, the Conv1d columns, row copies through indices) against float64 NumPy on odd sizes,
on both backends, with outputs poisoned with NaN first so that a row written where it must not
be, or not written, shows."""
from __future__ import annotations

import math

import numpy as np
import pytest

import akunu
from akunu import ops

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def dev(backend):
    return akunu.Device(backend)


def poisoned(device, shape):
    return device.upload(np.full(shape, np.nan, np.float32))


@pytest.mark.parametrize("n_heads, head_dim, rows, spans", [(1, 8, 3, [(0, 5), (2, 1), (4, 7)]),
                                                            (3, 20, 4, [(0, 1), (7, 70), (1, 33), (70, 7)])])
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
