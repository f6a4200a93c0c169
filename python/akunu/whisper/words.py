"""Word timestamps for the segments of one window: one alignment over all their text, then
the words handed back to each segment, with faster-whisper's clean-ups: over-long words at
sentence ends and after pauses are cut to twice the median word length, and a segment's bounds
follow its first and last word unless that word looks stretched."""
from __future__ import annotations

import numpy as np

from akunu.whisper.alignment import find_alignment, merge_punctuations

SENTENCE_ENDS = ".。!！?？"


def _clip_long_words(alignment):
    durations = np.array([w["end"] - w["start"] for w in alignment])
    durations = durations[durations.nonzero()]
    median = min(0.7, float(np.median(durations))) if len(durations) else 0.0
    longest = median * 2
    if len(durations):
        for i in range(1, len(alignment)):
            if alignment[i]["end"] - alignment[i]["start"] > longest:
                if alignment[i]["word"] in SENTENCE_ENDS:
                    alignment[i]["end"] = alignment[i]["start"] + longest
                elif alignment[i - 1]["word"] in SENTENCE_ENDS:
                    alignment[i]["start"] = alignment[i]["end"] - longest
    return median, longest


def _fit_segment(seg, words, median, longest, last_speech):
    if words[0]["end"] - last_speech > median * 4 and (
            words[0]["end"] - words[0]["start"] > longest
            or (len(words) > 1 and words[1]["end"] - words[0]["start"] > longest * 2)):
        if len(words) > 1 and words[1]["end"] - words[1]["start"] > longest:
            boundary = max(words[1]["end"] / 2, words[1]["end"] - longest)
            words[0]["end"] = words[1]["start"] = boundary
        words[0]["start"] = max(0, words[0]["end"] - longest)
    if seg["start"] < words[0]["end"] and seg["start"] - 0.5 > words[0]["start"]:
        words[0]["start"] = max(0, min(words[0]["end"] - median, seg["start"]))
    else:
        seg["start"] = words[0]["start"]
    if seg["end"] > words[-1]["start"] and seg["end"] + 0.5 < words[-1]["end"]:
        words[-1]["end"] = max(words[-1]["start"] + median, seg["end"])
    else:
        seg["end"] = words[-1]["end"]


def add_word_timestamps(model, tokens, segments: list[dict], slot: int, window: int, num_frames: int, heads,
                        opts, last_speech: float) -> float:
    """Sets segments[i]["words"] (word, start, end, probability) and returns the end of the
    last word (or last_speech when no word was found)."""
    per_segment = [[t for t in s["tokens"] if t < tokens.eot] for s in segments]
    text = [t for toks in per_segment for t in toks]
    alignment = find_alignment(model, tokens, slot, window, text, num_frames, heads)
    median, longest = _clip_long_words(alignment) if alignment else (0.0, 0.0)
    merge_punctuations(alignment, opts.prepend_punctuations, opts.append_punctuations)
    k = 0
    for seg, toks in zip(segments, per_segment):
        offset = seg["seek"] / 100.0
        words, saved = [], 0
        while k < len(alignment) and saved < len(toks):
            w = alignment[k]
            if w["word"]:
                words.append(dict(word=w["word"], start=round(offset + w["start"], 2), end=round(offset + w["end"], 2),
                                  probability=w["probability"]))
            saved += len(w["tokens"])
            k += 1
        if words:
            _fit_segment(seg, words, median, longest, last_speech)
            last_speech = seg["end"]
        seg["words"] = words
    return last_speech
