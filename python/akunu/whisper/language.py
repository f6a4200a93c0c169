"""Spoken-language detection for multilingual models: the decoder's first step after
<|startoftranscript|>, restricted to the language tokens."""
from __future__ import annotations

import numpy as np

from akunu.whisper.rules import log_softmax


def detect_languages(model, tokens, windows: list[int], slots: int) -> list[tuple[str, float, dict[str, float]]]:
    """(code, probability, every code's probability) for each window of the last encode."""
    if not tokens.language_ids:
        raise ValueError("this vocabulary has no language tokens, so the language cannot be detected")
    codes = list(tokens.language_ids)
    ids = np.array([tokens.language_ids[c] for c in codes])
    out = []
    for start in range(0, len(windows), slots):
        chunk = windows[start:start + slots]
        for slot, window in enumerate(chunk):
            model.set_audio(slot, window)
            model.reset(slot)
        logits = model.decode(list(range(len(chunk))), [[tokens.sot]] * len(chunk))
        for row in logits:
            p = np.exp(log_softmax(np.asarray(row, np.float64)[ids]))
            best = int(np.argmax(p))
            out.append((codes[best], float(p[best]), dict(zip(codes, p.tolist()))))
    return out
