"""Transcribing whole clips: 30-s windows, each starting where the last one's final complete
segment ended (seek), the previous text as the next prompt, silent windows skipped. Several
clips advance together: each round encodes one window of every clip still running in one
batch and decodes them over the sequence slots."""
from __future__ import annotations

import numpy as np

from akunu.whisper.fallback import decode_with_fallback
from akunu.whisper.result import Segment, Word
from akunu.whisper.rules import LogitRules
from akunu.whisper.search import Task
from akunu.whisper.segments import FRAMES_PER_SECOND, split_by_timestamps
from akunu.whisper.tokens import TIME_PRECISION
from akunu.whisper.words import add_word_timestamps

N_FRAMES = 3000  # mel frames of a 30-s window


def pad_or_trim(mel: np.ndarray, frames: int = N_FRAMES) -> np.ndarray:
    """mel [n_mels, n] cut or zero-padded to [n_mels, frames]."""
    mel = mel[:, :frames]
    return np.pad(mel, ((0, 0), (0, frames - mel.shape[1]))) if mel.shape[1] < frames else mel


class Clip:
    """One clip's progress: its mel (mel_frames.WholeMel or WindowedMel), the next window's
    first frame, the text so far."""

    def __init__(self, mel, tokens, initial_tokens):
        self.mel, self.content_frames, self.tokens = mel, mel.content_frames, tokens
        self.seek, self.all_tokens, self.reset_since = 0, list(initial_tokens), 0
        self.segments: list[Segment] = []
        self.last_speech = 0.0

    @property
    def running(self) -> bool:
        return self.seek < self.content_frames

    def window(self):
        size = min(N_FRAMES, self.content_frames - self.seek)
        return pad_or_trim(self.mel.frames(self.seek, size)), size


def make_rules(tokens, opts, begin_suppress) -> LogitRules:
    blank = (begin_suppress or [tokens.encode(" ")[0], tokens.eot]) if opts.suppress_blank else None
    return LogitRules(tokens, tokens.suppressed(opts.suppress_tokens), blank, opts.timestamps,
                      round(opts.max_initial_timestamp / TIME_PRECISION) if opts.max_initial_timestamp is not None
                      else None)


def _task(clip, i, opts, rules, n_text_ctx) -> Task:
    t = clip.tokens
    prefix = t.encode(" " + opts.prefix.strip()) if opts.prefix and clip.seek == 0 else None
    prompt = t.prompt(clip.all_tokens[clip.reset_since:], opts.timestamps, prefix, n_text_ctx)
    if len(prompt) + (opts.max_new_tokens or 1) > n_text_ctx:
        asked = f" and max_new_tokens={opts.max_new_tokens}" if opts.max_new_tokens else ""
        raise ValueError(f"a prompt of {len(prompt)} tokens (previous text, prefix){asked} leaves no room in the "
                         f"model's {n_text_ctx} text positions: shorten initial_prompt, prefix or max_new_tokens")
    return Task(i, prompt, prompt.index(t.sot), rules)


def run_round(model, tokens, clips, opts, rules, rng, slots, n_text_ctx, heads) -> None:
    """Decodes the next window of every clip in `clips` (at most `slots` of them) and moves
    each clip on."""
    windows = [c.window() for c in clips]
    model.encode(np.stack([w for w, _ in windows]))
    tasks = [_task(c, i, opts, rules, n_text_ctx) for i, c in enumerate(clips)]
    results = decode_with_fallback(model, tasks, tokens, opts, rng, slots, n_text_ctx)
    for i, (clip, (_, size), r) in enumerate(zip(clips, windows, results)):
        _take(model, clip, i, size, r, opts, heads)


def _is_silence(r, opts) -> bool:
    if opts.no_speech_threshold is None or r.no_speech_prob <= opts.no_speech_threshold:
        return False
    return not (opts.log_prob_threshold is not None and r.avg_logprob > opts.log_prob_threshold)


def _take(model, clip, window, size, r, opts, heads) -> None:
    start = clip.seek
    if _is_silence(r, opts):
        clip.seek += size
        return
    t = clip.tokens
    offset = start / FRAMES_PER_SECOND
    segs, clip.seek, single = split_by_timestamps(r.tokens, t.timestamp_begin, offset, start, size,
                                                  size / FRAMES_PER_SECOND)
    if opts.word_timestamps:
        clip.last_speech = add_word_timestamps(model, t, segs, 0, window, size, heads, opts, clip.last_speech)
        ends = [w["end"] for s in segs for w in s["words"]]
        if not single and ends and ends[-1] > offset:
            clip.seek = round(ends[-1] * FRAMES_PER_SECOND)
    if clip.seek <= start:  # never stall
        clip.seek = start + size
    for s in segs:
        text = t.decode(s["tokens"])
        if s["start"] == s["end"] or not text.strip():
            continue
        clip.all_tokens += s["tokens"]
        words = [Word(**w) for w in s["words"]] if opts.word_timestamps else None
        clip.segments.append(Segment(len(clip.segments), start, round(s["start"], 3), round(s["end"], 3), text,
                                     s["tokens"], r.temperature, r.avg_logprob, r.compression_ratio, r.no_speech_prob,
                                     words))
    if not opts.condition_on_previous_text or r.temperature > opts.prompt_reset_on_temperature:
        clip.reset_since = len(clip.all_tokens)
