"""Transcriptions written as plain text, SubRip (srt), WebVTT (vtt) or JSON."""
from __future__ import annotations

import json


def timestamp(seconds: float, marker: str = ".", hours: bool = False) -> str:
    """seconds as [hh:]mm:ss.mmm (hours always with hours=True)."""
    ms = max(0, round(seconds * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    head = f"{h:02d}:" if hours or h else ""
    return f"{head}{m:02d}:{s:02d}{marker}{ms:03d}"


def _cues(result, words: bool):
    """(start, end, text) of each segment, or of each word with words=True."""
    for seg in result.segments:
        if words and seg.words:
            yield from ((w.start, w.end, w.word.strip()) for w in seg.words)
        else:
            yield seg.start, seg.end, seg.text.strip()


def to_txt(result, timestamps: bool = False, words: bool = False) -> str:
    if not (timestamps or words):
        return result.text.strip() + "\n"
    return "".join(f"[{timestamp(a)} --> {timestamp(b)}] {t}\n" for a, b, t in _cues(result, words))


def to_srt(result, words: bool = False) -> str:
    return "".join(f"{i}\n{timestamp(a, ',', True)} --> {timestamp(b, ',', True)}\n{t}\n\n"
                   for i, (a, b, t) in enumerate(_cues(result, words), 1))


def to_vtt(result, words: bool = False) -> str:
    return "WEBVTT\n\n" + "".join(f"{timestamp(a)} --> {timestamp(b)}\n{t}\n\n" for a, b, t in _cues(result, words))


def to_json(result) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False, indent=1) + "\n"


def render(result, fmt: str, timestamps: bool = False, words: bool = False) -> str:
    """result in fmt: "txt", "srt", "vtt" or "json"."""
    if fmt == "txt":
        return to_txt(result, timestamps, words)
    if fmt == "srt":
        return to_srt(result, words)
    if fmt == "vtt":
        return to_vtt(result, words)
    if fmt == "json":
        return to_json(result)
    raise ValueError(f"format {fmt!r}: expected txt, srt, vtt or json")
