"""The options of Whisper.transcribe, checked in one place."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass
class TranscribeOptions:
    """beam_size: 1 for greedy; more for beam search (with patience and length_penalty:
    score = sum of log-probs / length ** length_penalty). temperature: one value, or a sequence
    tried in turn while a window fails the compression_ratio_threshold or log_prob_threshold
    (sampling best_of candidates above 0). no_speech_threshold: a window whose no-speech
    probability is above it and whose avg log-prob is below log_prob_threshold is skipped as
    silence. condition_on_previous_text: the previous windows' text is the next one's prompt
    (reset after a window decoded above prompt_reset_on_temperature). timestamps: decode
    segment timestamps; word_timestamps: per-word times from the cross-attention.
    suppress_tokens: ids never produced, -1 meaning the non-speech symbols; suppress_blank: no
    blank first token. language: a code ("en", "fr", ...) or None to detect it on a
    multilingual model; task: "transcribe" or "translate". max_new_tokens: per window (None:
    half the text context); seed: of the sampler."""

    beam_size: int = 1
    best_of: int = 5
    patience: float = 1.0
    length_penalty: float = 1.0
    temperature: float | tuple = 0.0
    compression_ratio_threshold: float | None = 2.4
    log_prob_threshold: float | None = -1.0
    no_speech_threshold: float | None = 0.6
    condition_on_previous_text: bool = True
    prompt_reset_on_temperature: float = 0.5
    initial_prompt: str | list | None = None
    prefix: str | None = None
    suppress_blank: bool = True
    suppress_tokens: tuple | list | None = (-1,)
    timestamps: bool = False
    max_initial_timestamp: float = 1.0
    word_timestamps: bool = False
    prepend_punctuations: str = "\"'“¿([{-"
    append_punctuations: str = "\"'.。,，!！?？:：”)]}、"
    language: str | None = None
    task: str = "transcribe"
    max_new_tokens: int | None = None
    seed: int = 0

    @classmethod
    def from_kwargs(cls, **kwargs) -> TranscribeOptions:
        """Options from transcribe()'s keywords, checked; an unknown keyword is a TypeError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"transcribe() got unknown options {unknown}; known: {sorted(known)}")
        opts = cls(**kwargs)
        opts.check()
        return opts

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The temperatures to try, in order."""
        t = self.temperature
        return tuple(float(x) for x in t) if isinstance(t, (tuple, list)) else (float(t),)

    def check(self) -> None:
        """A ValueError naming the first option out of range."""
        if not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam_size={self.beam_size!r}: expected an integer >= 1")
        if not isinstance(self.best_of, int) or self.best_of < 1:
            raise ValueError(f"best_of={self.best_of!r}: expected an integer >= 1")
        if not self.temperatures or any(not math.isfinite(t) or t < 0 for t in self.temperatures):
            raise ValueError(f"temperature={self.temperature!r}: expected finite values >= 0")
        if not self.patience > 0:
            raise ValueError(f"patience={self.patience!r}: expected > 0")
        if self.max_new_tokens is not None and (not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1):
            raise ValueError(f"max_new_tokens={self.max_new_tokens!r}: expected an integer >= 1")
        if self.task not in ("transcribe", "translate"):
            raise ValueError(f"task={self.task!r}: expected 'transcribe' or 'translate'")
