"""Word timestamps from the decoder's cross-attention: the alignment heads' attention over
the audio frames, normalised per frame, median-filtered in time, averaged over heads, then a
monotonic path through it by dynamic time warping (DTW). A word starts where the path enters
its first token. As OpenAI's whisper `timing.py` does it."""
from __future__ import annotations

import numpy as np

from akunu.whisper.rules import log_softmax

TOKENS_PER_SECOND = 50  # encoder frames per second


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """Median over a window of `width` (odd) along the last axis, with reflected edges."""
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1), axis=-1)


def dtw(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest monotonic path from (0, 0) to (N-1, M-1) through cost [N, M], stepping
    down, right or diagonally; returns its (row indices, column indices)."""
    n, m = cost.shape
    total = np.full((n + 1, m + 1), np.inf)
    trace = np.full((n + 1, m + 1), -1, np.int8)
    total[0, 0] = 0
    for j in range(1, m + 1):
        for i in range(1, n + 1):
            c0, c1, c2 = total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            total[i, j] = cost[i - 1, j - 1] + c
            trace[i, j] = t
    trace[0, :], trace[:, 0] = 2, 1
    i, j, path = n, m, []
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        t = trace[i, j]
        i, j = (i - 1, j - 1) if t == 0 else (i - 1, j) if t == 1 else (i, j - 1)
    path = np.array(path[::-1])
    return path[:, 0], path[:, 1]


def default_heads(layers: int, heads: int) -> list[list[int]]:
    """Every head of the second half of the decoder's layers (OpenAI's default)."""
    return [[layer, h] for layer in range(layers // 2, layers) for h in range(heads)]


def attention_matrix(weights: np.ndarray, num_frames: int, medfilt_width: int = 7) -> np.ndarray:
    """weights [heads, rows, 1500] (softmax over the frames) -> [rows, num_frames // 2]: each
    head renormalised over the audio's frames, standardised per frame, filtered, averaged."""
    w = weights[:, :, :num_frames // 2].astype(np.float64)
    w = w / np.maximum(w.sum(axis=-1, keepdims=True), 1e-30)
    w = (w - w.mean(axis=-2, keepdims=True)) / np.maximum(w.std(axis=-2, keepdims=True), 1e-12)
    return median_filter(w, medfilt_width).mean(axis=0)


def find_alignment(model, tokens, slot: int, window: int, text_tokens: list[int], num_frames: int,
                   heads: list[list[int]], medfilt_width: int = 7) -> list[dict]:
    """Words of text_tokens with start, end (seconds into the window) and probability."""
    if not text_tokens:
        return []
    prefix = tokens.sot_sequence + [tokens.no_timestamps]
    seq = prefix + list(text_tokens) + [tokens.eot]
    model.set_audio(slot, window)
    model.reset(slot)
    logits = np.array(model.decode([slot], [seq], all_logits=True))
    probs = np.exp(log_softmax(logits[len(prefix) - 1:-1, :tokens.eot]))
    token_probs = probs[np.arange(len(text_tokens)), text_tokens]
    by_layer = {}
    for layer, _ in heads:
        by_layer.setdefault(layer, np.array(model.cross_attention(layer)))  # [rows, heads, 1500]
    weights = np.stack([by_layer[layer][:, h, :] for layer, h in heads])
    matrix = attention_matrix(weights, num_frames, medfilt_width)[len(prefix) - 1:-1]
    text_idx, time_idx = dtw(-matrix)
    words, word_tokens = tokens.split_to_words(list(text_tokens) + [tokens.eot])
    if len(word_tokens) <= 1:
        return []
    bounds = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    jumps = np.pad(np.diff(text_idx), (1, 0), constant_values=1).astype(bool)
    jump_times = time_idx[jumps] / TOKENS_PER_SECOND
    starts, ends = jump_times[bounds[:-1]], jump_times[bounds[1:]]
    return [dict(word=w, tokens=t, start=float(s), end=float(e), probability=float(np.mean(token_probs[i:j])))
            for w, t, s, e, i, j in zip(words, word_tokens, starts, ends, bounds[:-1], bounds[1:])]


def merge_punctuations(alignment: list[dict], prepended: str, appended: str) -> None:
    """Opening punctuation joins the next word, closing punctuation the previous one."""
    i, j = len(alignment) - 2, len(alignment) - 1
    while i >= 0:
        prev, nxt = alignment[i], alignment[j]
        if prev["word"].startswith(" ") and prev["word"].strip() in prepended:
            nxt["word"], nxt["tokens"] = prev["word"] + nxt["word"], prev["tokens"] + nxt["tokens"]
            prev["word"], prev["tokens"] = "", []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(alignment):
        prev, nxt = alignment[i], alignment[j]
        if not prev["word"].endswith(" ") and nxt["word"] in appended:
            prev["word"], prev["tokens"] = prev["word"] + nxt["word"], prev["tokens"] + nxt["tokens"]
            nxt["word"], nxt["tokens"] = "", []
        else:
            i = j
        j += 1
