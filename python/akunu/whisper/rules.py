"""The rules applied to each step's logits before a token is chosen, as OpenAI's whisper and
faster-whisper apply them: suppressed tokens, a blank start, and the timestamp grammar.

Timestamp grammar (when timestamps are on): the first token is a timestamp no later than
max_initial_timestamp; timestamps come in pairs (end of one segment, start of the next) except
before <|endoftext|>; they never go back, and a segment is never empty; and where the
timestamps together are likelier than any single text token, a timestamp is taken.
"""
from __future__ import annotations

import numpy as np

NEG_INF = -np.inf


def logsumexp(x: np.ndarray) -> np.ndarray:
    """log(sum(exp(x))) over the last axis (keeping it): the exponentials in float32, the
    engine's precision and several times faster than float64's, summed in float64."""
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    total = np.sum(np.exp((x - m).astype(np.float32)), axis=-1, keepdims=True, dtype=np.float64)
    with np.errstate(divide="ignore"):  # nothing left: -inf
        return m + np.log(total)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x - logsumexp(x)


class LogitRules:
    """suppress: ids never chosen; begin_suppress: ids not chosen first (suppress_blank);
    timestamps: apply the grammar; max_initial_timestamp_index: the latest first timestamp."""

    def __init__(self, tokens, suppress: list[int], begin_suppress: list[int] | None, timestamps: bool,
                 max_initial_timestamp_index: int | None):
        self.t = tokens
        self.suppress = np.asarray(suppress, np.int64)
        self.begin_suppress = np.asarray(begin_suppress or [], np.int64)
        self.timestamps = timestamps
        self.max_initial = max_initial_timestamp_index

    def apply(self, logits: np.ndarray, generated: list[int]) -> np.ndarray:
        """The logits of one row after the rules; `generated` are the tokens sampled so far
        (after the prompt). Returns a float64 copy."""
        x = np.array(logits, np.float64)
        x[~np.isfinite(x)] = NEG_INF  # a NaN never wins
        if not generated and self.begin_suppress.size:
            x[self.begin_suppress] = NEG_INF
        if self.suppress.size:
            x[self.suppress] = NEG_INF
        if self.timestamps:
            self._timestamp_rules(x, generated)
        if not np.isfinite(x).any():
            x[self.t.eot] = 0.0  # nothing left to choose: end the text
        return x

    def _timestamp_rules(self, x, generated):
        tb, eot = self.t.timestamp_begin, self.t.eot
        x[self.t.no_timestamps] = NEG_INF
        last_ts = len(generated) >= 1 and generated[-1] >= tb
        penultimate_ts = len(generated) < 2 or generated[-2] >= tb
        if last_ts:
            if penultimate_ts:
                x[tb:] = NEG_INF  # a pair just closed: text (or the end) follows
            else:
                x[:eot] = NEG_INF  # a segment just ended: a timestamp or the end follows
        stamps = [g for g in generated if g >= tb]
        if stamps:
            # never back in time; a new segment is at least one step long
            last = stamps[-1] if last_ts and not penultimate_ts else stamps[-1] + 1
            x[tb:last] = NEG_INF
        if not generated:
            x[:tb] = NEG_INF
            if self.max_initial is not None:
                x[tb + self.max_initial + 1:] = NEG_INF
        # the timestamps' total probability against the likeliest text token's, both as
        # log-probabilities less the same log-sum: compared on the logits themselves
        if logsumexp(x[tb:])[0] > np.max(x[:tb]):
            x[:tb] = NEG_INF
