"""Run single kernels now, on buffers, for exploration and tests.

Each call records one dispatch into a fresh CommandList, submits it and waits. Sizes come from
the buffers' shapes; the engine's decode loop records its kernels once and replays them instead.
"""
from __future__ import annotations

import math

import numpy as np

from akunu import _akunu
from akunu._akunu import CommandList, kernels
from akunu.sampling import check_sampling


def _run(device, record) -> float:
    """Records with `record(cl)`, runs it, and returns the GPU time in ms (NaN without timestamps)."""
    cl = CommandList(device)
    cl.begin()
    t0 = cl.timestamp()
    record(cl)
    t1 = cl.timestamp()
    cl.end()
    cl.submit()
    cl.wait()
    return cl.elapsed_ms(t0, t1)


def _count(buf) -> int:
    return math.prod(buf.shape)


def fill(out, value: float = 0.0, *, bits: int = 0) -> float:
    """out[:] = value (f32/f16 buffers) or the raw 32-bit pattern `bits` (u32 buffers)."""
    return _run(out.device, lambda cl: kernels.fill(cl, out, out.dtype, _count(out), value, bits))


def copy(src, dst, nbytes: int | None = None) -> float:
    """dst[:nbytes] = src[:nbytes] bitwise (default: all of src), on the compute queue."""
    nbytes = src.size if nbytes is None else nbytes
    return _run(dst.device, lambda cl: kernels.copy(cl, src, dst, nbytes))


def add(a, b, out) -> float:
    """out = a + b, elementwise, computed in fp32."""
    return _run(out.device, lambda cl: kernels.add(cl, a, b, out, out.dtype, _count(out)))


def rmsnorm(x, w, out, eps: float = 1e-5, weight_offset: float = 0.0) -> float:
    """out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * (w + weight_offset) for each row r of x."""
    dim = x.shape[-1]
    rows = _count(x) // dim
    return _run(out.device, lambda cl: kernels.rmsnorm(cl, x, w, out, x.dtype, rows, dim, eps, weight_offset))


def gemv(w, x, y, wtype: str | None = None, norm=None, eps: float = 1e-5, weight_offset: float = 0.0,
         x_rounding: str | None = None, up=None, activation: str = "silu") -> float:
    """y = W @ x with W [rows, k], x [k] f32, y [rows] f32. W is an f32/f16/bf16 array, or raw
    blocks of a ggml type named by `wtype` ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K",
    "Q5_K", "Q6_K"), with rows and k taken from y and x. With `norm` (a [k] f32 buffer g), x is read through an
    RMSNorm first: x * (g + weight_offset) / sqrt(mean(x^2) + eps), as the engine folds its
    norms. With `up` (a [k] f32 buffer), x is the gate of a gated activation and the product
    reads act(x) * up ("silu" or "gelu_tanh"), as the engine folds the FFN's activation into
    its down projection. x_rounding: how Q8_0/Q4_0/Q4_1 rows hold x. "float": fp32 products;
    "int16" (tile-major forms on devices with integer dot products, kernels.gemv_int16) and
    "int8" (rows of a multiple of 256 elements there, kernels.gemv_int_dot): integer dot
    products against x rounded per block of 32, an error where that path is not taken; None:
    the engine's choice (kernels.engine_x_rounding: int16, int8 with AKUNU_INT8=1 or fp32 with
    tuning float_x=1, each where taken, else fp32)."""
    if wtype is None:
        if len(w.shape) != 2:
            raise ValueError(f"gemv: W must be 2-D [rows, k], got shape {tuple(w.shape)}")
        rows, k = w.shape
        wtype = w.dtype
    else:
        rows, k = _count(y), _count(x)
    rounding = kernels.engine_x_rounding(y.device) if x_rounding is None else x_rounding
    taken = kernels.gemv_x_rounding(y.device, wtype, k, rounding)
    if x_rounding == "int8" and taken != "int8":
        raise ValueError(f"gemv: no integer-dot path for {wtype} rows of {k} on this device (x_rounding='int8')")
    if x_rounding == "int16" and taken != "int16":
        raise ValueError(f"gemv: no int16 path for {wtype} on this device (x_rounding='int16'; tile-major "
                         "Q8_0/Q4_0/Q4_1 on devices with integer dot products)")
    return _run(y.device, lambda cl: kernels.gemv(cl, w, wtype, x, y, rows, k, norm, eps, weight_offset, rounding,
                                                  up=up, activation=activation))


def _chunk_step(device, m: int, n_tokens: int | None):
    """The StepState of a chunk of n_tokens (default m) tokens for a GEMM recorded for m rows."""
    n_tokens = m if n_tokens is None else int(n_tokens)
    if not 0 < n_tokens <= m:
        raise ValueError(f"n_tokens must be in [1, {m}] (the GEMM's rows), got {n_tokens}")
    return _step(device, n_tokens)


def gemm(w, x, y, wtype: str | None = None, coopmat: bool | None = None, min_rows: int = 0, max_rows: int = 0,
         accumulate: bool = False, n_tokens: int | None = None) -> float:
    """Y = X @ W.T with X [m, k] f32, Y [m, n] f32 and W [n, k] as in gemv: the prefill kernel.
    X may be f16 on the cooperative-matrix GEMM with k a multiple of 8 (what a prefill chunk's
    norms and activation write there).
    coopmat: None takes the engine's choice (cooperative matrices where the device has them),
    False the scalar variant, True the cooperative-matrix one (an error where the device has none).
    The kernel runs only if min_rows <= m < max_rows (max_rows 0: no bound), as a recorded
    prefill GEMM runs only for chunks of that many tokens. accumulate: Y += X @ W.T (the
    residual adds of the output projections). n_tokens: the chunk's tokens (default m), as a
    recorded table's GEMM of m rows steps a shorter chunk: only its first n_tokens rows of Y are
    computed and written."""
    if coopmat and not y.device.profile["gemm_coopmat"]:
        raise ValueError("gemm: this device has no cooperative-matrix GEMM (coopmat=True)")
    m, k = x.shape
    n = y.shape[-1]
    if wtype is None:
        if tuple(w.shape) != (n, k):
            raise ValueError(f"gemm: W must be [n, k] = [{n}, {k}], got shape {tuple(w.shape)}")
        wtype = w.dtype
    step = _chunk_step(y.device, m, n_tokens)
    return _run(y.device, lambda cl: kernels.gemm(cl, w, wtype, x, y, m, n, k, step, coopmat is not False, min_rows,
                                                  max_rows, accumulate))


def gemm_gated(w_gate, w_up, x, out, activation: str = "silu", min_rows: int = 0, max_rows: int = 0,
               n_tokens: int | None = None) -> float:
    """out [m, n] f16 = act(X @ W_gate.T) * (X @ W_up.T) with X [m, k] f16 and W_gate, W_up
    [n, k] f16: a prefill chunk's gate and up GEMMs and gated activation (silu or gelu_tanh) in
    one dispatch, on devices with cooperative matrix 2 (kernels.gemm_fuses_gated). Runs only if
    min_rows <= m < max_rows, and for the first n_tokens rows, as gemm."""
    m, k = x.shape
    n = out.shape[-1]
    for name, w in (("W_gate", w_gate), ("W_up", w_up)):
        if tuple(w.shape) != (n, k):
            raise ValueError(f"gemm_gated: {name} must be [n, k] = [{n}, {k}], got shape {tuple(w.shape)}")
    step = _chunk_step(out.device, m, n_tokens)
    return _run(out.device, lambda cl: kernels.gemm_gated(cl, w_gate, w_up, x, out, m, n, k, step, activation, min_rows,
                                                          max_rows))


def dequant_f16(w, out, wtype: str) -> float:
    """out [n, k] f16 = W as halves, W raw blocks of a ggml block format (Q8_0, Q4_0, Q4_1, Q5_0,
    Q5_1, Q4_K, Q5_K, Q6_K): what a long prefill chunk's GEMM reads in place of the blocks."""
    n, k = out.shape
    step = out.device.upload(np.array([0, 0, 1, 0], dtype=np.uint32))
    return _run(out.device, lambda cl: kernels.dequant_f16(cl, w, wtype, out, n, k, step))


def embed(w, token_ids, out, wtype: str | None = None, scale: float = 1.0) -> float:
    """out[r] = scale * W[token_ids[r]] as f32, the engine's embedding lookup: W [vocab, dim] as
    in gemv (raw blocks with `wtype`, vocab then taken from the blocks' count), token_ids a u32
    buffer of the rows' ids, out [rows, dim] f32. An id >= vocab raises ValueError (the kernel
    itself, called directly, reads nothing past W for one and leaves its row as it was, on every
    backend)."""
    rows, dim = (1, out.shape[0]) if len(out.shape) == 1 else out.shape
    if wtype is None:
        if len(w.shape) != 2 or w.shape[1] != dim:
            raise ValueError(f"embed: W must be [vocab, {dim}], got shape {tuple(w.shape)}")
        vocab, wtype = w.shape[0], w.dtype
    else:
        t = next(t for t in _akunu.tensor_types() if t["name"] == wtype.upper())
        vocab = w.size // t["block_bytes"] * t["block_size"] // dim
    ids = np.asarray(token_ids.numpy()).reshape(-1)
    if ids.size < rows:
        raise ValueError(f"embed: token_ids holds {ids.size} ids, out has {rows} rows")
    bad = ids[:rows] >= vocab
    if bad.any():
        raise ValueError(f"embed: token id {int(ids[:rows][bad][0])} is out of range for a table of {vocab} rows "
                         f"(ids must be in [0, {vocab}))")
    step = out.device.upload(np.array([0, 0, rows, 0], dtype=np.uint32))  # StepState: all rows, ids from slot 0
    return _run(out.device, lambda cl: kernels.embed(cl, w, wtype, vocab, token_ids, step, out, dim, scale, rows))


def to_half(x, out) -> float:
    """out[:n] = x as halves, x an f32 buffer of n elements and out an f16 buffer of at least n:
    what a chunk's table runs between an attention that writes f32 rows and an O GEMM that
    reads halves."""
    n = int(np.prod(x.shape))
    if int(np.prod(out.shape)) < n:
        raise ValueError(f"to_half: out holds {int(np.prod(out.shape))} elements, x {n}")
    return _run(x.device, lambda cl: kernels.to_half(cl, x, out, n))


def softcap(x, cap: float, n_tokens: int | None = None) -> float:
    """x = cap * tanh(x / cap) in place, the final-logit soft-capping: x [rows, n] f32. Only
    the first n_tokens rows are capped (default all), as the engine caps a chunk's rows."""
    rows, n = (1, x.shape[0]) if len(x.shape) == 1 else x.shape
    step = x.device.upload(np.array([0, 0, rows if n_tokens is None else n_tokens, 0], dtype=np.uint32))
    return _run(x.device, lambda cl: kernels.softcap(cl, x, step, rows, n, cap))


def sample(logits, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
           seed: int = 0, position: int = 0, device=None):
    """Samples one token per row of logits [rows, n] (an f32 buffer, or a NumPy array copied to
    `device`) with the GPU sampler the engine uses. Row r draws at `position + r`, so rows are
    independent draws. Returns (ids, logprobs): NumPy arrays of the rows' tokens and their
    log-probabilities under log_softmax(logits). The settings are checked as Sampler checks
    them (ValueError for top_p <= 0, NaN, ...; a temperature below MIN_TEMPERATURE is greedy)."""
    temperature = check_sampling(temperature, top_k, top_p, min_p, seed)
    if isinstance(logits, np.ndarray):
        if device is None:
            raise ValueError("sample: pass device= with a NumPy array of logits")
        host = np.ascontiguousarray(logits, dtype=np.float32)
        logits = device.upload(host.reshape(-1, host.shape[-1]))
    device = logits.device
    rows, n = (1, logits.shape[0]) if len(logits.shape) == 1 else logits.shape
    ids = device.upload(np.full(rows, 0xFFFFFFFF, np.uint32))
    logprobs = device.upload(np.full(rows, np.nan, np.float32))
    step = device.upload(np.array([position, 0, 0, 0], dtype=np.uint32))  # draws at pos + n_tokens + row
    cfg = np.zeros(8, np.uint32)
    cfg[[0, 2, 3]] = np.array([temperature, top_p, min_p], np.float32).view(np.uint32)
    cfg[1] = top_k
    cfg[4], cfg[5] = seed & 0xFFFFFFFF, seed >> 32
    sampler = device.upload(cfg)
    _run(device, lambda cl: kernels.sample(cl, logits, ids, logprobs, step, sampler, n, rows))
    out_ids, out_logprobs = ids.numpy().astype(np.int64), logprobs.numpy().copy()
    if np.isnan(out_logprobs).any():  # the sampled token's log-probability is NaN only if the row holds NaN
        row = int(np.flatnonzero(np.isnan(out_logprobs))[0])
        raise _akunu.Error(f"sample: row {row} of the logits holds NaN; no token can be sampled from it")
    return out_ids, out_logprobs


# ---- Encoder kernels (bert, whisper) ----------------------------------------------------------------------

def _step(device, n_tokens: int):
    """A StepState buffer {pos 0, token_slot 0, n_tokens, 0}: the rows a kernel runs."""
    return device.upload(np.array([0, 0, n_tokens, 0], np.uint32))


def layernorm(x, w, b, out, eps: float = 1e-12, n_tokens: int | None = None) -> float:
    """out[r] = (x[r] - mean) / sqrt(var + eps) * w + b for the first n_tokens rows of x
    [rows, dim] f32 (default: all); the other rows of out are left as they were."""
    dim = x.shape[-1]
    rows = _count(x) // dim
    step = _step(out.device, rows if n_tokens is None else n_tokens)
    return _run(out.device, lambda cl: kernels.layernorm(cl, x, w, b, out, step, rows, dim, eps))


def gelu(x, out) -> float:
    """out = GELU(x) with erf (BERT's activation), f32."""
    return _run(out.device, lambda cl: kernels.gelu(cl, x, out, _count(out)))


def encoder_attention(qkv, seq, out, n_heads: int, head_dim: int, scale: float | None = None,
                      n_tokens: int | None = None) -> float:
    """Bidirectional attention inside packed sequences: qkv [rows, 3 n_heads head_dim] f32 holds
    [q | k | v] per token row, seq [rows, 2] u32 (start, len) names the rows each row attends,
    out [rows, n_heads head_dim] f32. scale defaults to 1 / sqrt(head_dim)."""
    width = n_heads * head_dim
    rows = qkv.shape[0]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    step = _step(out.device, rows if n_tokens is None else n_tokens)
    return _run(out.device, lambda cl: kernels.encoder_attention(cl, qkv, seq, step, out, n_heads, head_dim, rows,
                                                                 qkv.shape[1], width, 2 * width, width, scale))


def span_attention(q, kv, seq, out, n_heads: int, head_dim: int, k_offset: int, v_offset: int, weights=None,
                   scale: float | None = None, n_tokens: int | None = None, chunk_keys: int | None = None) -> float:
    """Attention of each query row of q [rows, q_stride] f32 over its span of key rows of kv
    [key rows, kv_stride] f32 (K at column k_offset, V at v_offset), seq [rows, 2] u32 (start,
    len) naming the span; out [rows, n_heads head_dim] f32. With weights [rows, n_heads, width]
    f32 the softmax weights are stored too. scale defaults to 1 / sqrt(head_dim). With
    chunk_keys (and weights), each (row, head) is split over chunks of that many keys and merged,
    as a decoder step's cross-attention runs (0: the device's chunks)."""
    rows = q.shape[0]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    step = _step(out.device, rows if n_tokens is None else n_tokens)
    width = 0 if weights is None else weights.shape[-1]
    if chunk_keys is not None:
        if weights is None:
            raise ValueError("span_attention: chunk_keys (the split over keys) needs weights")
        partial = out.device.upload(np.zeros(kernels.span_partial_floats(rows, n_heads, head_dim), np.float32))
        return _run(out.device, lambda cl: kernels.span_attention_split(
            cl, q, kv, seq, step, out, n_heads, head_dim, rows, q.shape[1], kv.shape[1], k_offset, v_offset,
            n_heads * head_dim, scale, weights, width, partial, chunk_keys))
    return _run(out.device, lambda cl: kernels.span_attention(
        cl, q, kv, seq, step, out, n_heads, head_dim, rows, q.shape[1], kv.shape[1], k_offset, v_offset,
        n_heads * head_dim, scale, weights, width))


def window_attention(qkv, out, n_heads: int, head_dim: int, window: int, tile_rows: int = 0,
                     scale: float | None = None, n_tokens: int | None = None) -> float:
    """Attention inside windows of `window` rows, as Whisper's encoder attends each audio window:
    qkv [rows, 3 n_heads head_dim] f32 holds [q | k | v] per row (rows a whole number of
    windows), and each row attends every row of its own window; out [rows, n_heads head_dim]
    f32. tile_rows: query rows per workgroup of the tiled kernel (0: the device's choice).
    scale defaults to 1 / sqrt(head_dim)."""
    rows = qkv.shape[0]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    step = _step(out.device, rows if n_tokens is None else n_tokens)
    starts = np.arange(rows, dtype=np.uint32) // window * window
    seq = out.device.upload(np.stack([starts, np.full(rows, window, np.uint32)], axis=1))
    return _run(out.device, lambda cl: kernels.window_attention(cl, qkv, seq, step, out, n_heads, head_dim, rows,
                                                                window, tile_rows, scale))


def conv_gather(x, out, channels: int, kernel: int, stride: int, pad: int, t_in: int, t_out: int,
                window_stride: int, c_stride: int, t_stride: int, n_tokens: int | None = None) -> float:
    """The im2col columns of a Conv1d into out [rows, channels * kernel] f32: row r is position
    r % t_out of window r // t_out, column c * kernel + k holds channel c at position
    t * stride + k - pad (0 outside [0, t_in)) of x, f32 at the given strides."""
    rows = out.shape[0]
    step = _step(out.device, rows if n_tokens is None else n_tokens)
    return _run(out.device, lambda cl: kernels.conv_gather(cl, x, out, step, rows, channels, kernel, stride, pad,
                                                           t_in, t_out, window_stride, c_stride, t_stride))


def copy_rows(src, src_rows, dst, dst_rows, n_tokens: int | None = None) -> float:
    """dst[dst_rows[r], :n] = src[src_rows[r], :n] for the first n_tokens rows (default: all of
    src_rows), f32 rows of src [.., src_stride] and dst [.., dst_stride], n their common width."""
    rows = _count(src_rows)
    n = min(src.shape[1], dst.shape[1])
    step = _step(dst.device, rows if n_tokens is None else n_tokens)
    return _run(dst.device, lambda cl: kernels.copy_rows(cl, src, src_rows, dst, dst_rows, step, rows, n,
                                                         src.shape[1], dst.shape[1], src.shape[0], dst.shape[0]))


def pool(h, texts, out) -> float:
    """out[t] = the mean (or first row) of each text's rows of h [rows, dim], L2-normalized or
    not, as the u32 texts buffer says: {count, mode (0 mean, 1 cls), normalize, 0}, then
    (start, len) per text; out is [max_texts, dim]."""
    dim = h.shape[-1]
    return _run(out.device, lambda cl: kernels.pool(cl, h, texts, out, _count(h) // dim, dim, out.shape[0]))


# The fields of a greedy chain slot's state (params.h WhisperChainSlot): u32 each, no_speech f32.
WHISPER_CHAIN_FIELDS = ("token", "pos", "generated", "max_new", "last", "before_last", "last_stamp", "flags",
                        "max_initial", "cross_base", "picks", "no_speech")


def whisper_pick(logits, row_slot, masks, state, tokens, logprobs, eot: int, timestamp_begin: int,
                 no_timestamps: int, no_speech: int = -1, n_ctx: int = 448, step: int = 0,
                 n_tokens: int | None = None, top_k: int = 0) -> float:
    """A greedy chain's pick (akunu.whisper.chain) for each of the first n_tokens rows (default:
    all) of logits [rows, vocab] f32: the rules of slot row_slot[r] (masks u32 [slots, 2, words]:
    suppress and begin_suppress bits; state u32 [slots, 12], WHISPER_CHAIN_FIELDS), the argmax
    and its log-probability into column `step` of tokens u32 / logprobs f32 [slots, steps], and
    the slot's state moved on. top_k > 0 (beam search): the top_k likeliest ids under the rules
    and their log-probabilities into columns [0, top_k) instead (0xFFFFFFFF and -inf where fewer
    remain), the state unchanged."""
    rows, vocab = logits.shape
    slots, steps = tokens.shape
    head = _step(logits.device, rows if n_tokens is None else n_tokens)
    none = 0xFFFFFFFF if no_speech < 0 else no_speech
    return _run(logits.device, lambda cl: kernels.whisper_pick(
        cl, logits, row_slot, head, masks, state, tokens, logprobs, vocab, eot, timestamp_begin, no_timestamps, none,
        masks.shape[-1], step, steps, n_ctx, rows, slots, top_k))
