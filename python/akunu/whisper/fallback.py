"""Temperature fallback: a window decoded at temperature 0 that looks wrong (too repetitive by
its zlib compression ratio, or too unlikely by its average log-probability) is decoded again at
the next temperature, unless the window is judged silent. As faster-whisper and OpenAI's
whisper do it; every window of a batch falls back on its own."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from akunu.whisper.search import search


def compression_ratio(text: str) -> float:
    """len(utf-8 bytes) / len(zlib-compressed bytes): high for text that repeats itself."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data))


@dataclass
class WindowResult:
    tokens: list[int]  # sampled tokens, without <|endoftext|>
    text: str
    avg_logprob: float  # over the sampled tokens and <|endoftext|>
    no_speech_prob: float
    temperature: float
    compression_ratio: float
    token_logprobs: list[float]


def _needs_fallback(r: WindowResult, opts) -> bool:
    bad = False
    if opts.compression_ratio_threshold is not None and r.compression_ratio > opts.compression_ratio_threshold:
        bad = True  # repeating itself
    low_logprob = opts.log_prob_threshold is not None and r.avg_logprob < opts.log_prob_threshold
    if low_logprob:
        bad = True
    if opts.no_speech_threshold is not None and r.no_speech_prob > opts.no_speech_threshold and low_logprob:
        bad = False  # silence: no better text to find
    return bad


def decode_with_fallback(model, tasks, tokens, opts, rng, slots: int, n_text_ctx: int) -> list[WindowResult]:
    """The result of each task after trying opts.temperatures in turn."""
    tried = [[] for _ in tasks]
    final: list[WindowResult | None] = [None] * len(tasks)
    pending = list(range(len(tasks)))
    temperature = 0.0
    for temperature in opts.temperatures:
        if not pending:
            break
        decoded = search(model, [tasks[i] for i in pending], tokens, temperature=temperature, beam_size=opts.beam_size,
                         best_of=opts.best_of, patience=opts.patience, length_penalty=opts.length_penalty,
                         max_new_tokens=opts.max_new_tokens or n_text_ctx // 2, n_text_ctx=n_text_ctx, rng=rng,
                         slots=slots)
        still = []
        for i, d in zip(pending, decoded):
            text = tokens.decode(d.best.tokens).strip()
            r = WindowResult(d.best.tokens, text, d.best.sum_logprob / (len(d.best.tokens) + 1), d.no_speech_prob,
                             temperature, compression_ratio(text), d.best.logprobs)
            tried[i].append(r)
            if _needs_fallback(r, opts):
                still.append(i)
            else:
                final[i] = r
        pending = still
    for i in pending:  # every temperature failed: the likeliest that does not repeat itself
        ok = [r for r in tried[i] if opts.compression_ratio_threshold is None
              or r.compression_ratio <= opts.compression_ratio_threshold]
        best = max(ok or tried[i], key=lambda r: r.avg_logprob)
        best.temperature = temperature  # the last one tried decides whether the prompt resets
        final[i] = best
    return final
