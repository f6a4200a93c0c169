"""akunu.Whisper: speech to text with a Whisper model on akunu's engine.

    w = akunu.load("whisper-tiny.en")            # an HF folder, a CTranslate2 folder or a GGML file
    r = w.transcribe("talk.wav", beam_size=5, timestamps=True)
    print(r.text); r.segments[0].start

The engine (`_akunu.WhisperModel`) computes the mel, runs the encoder and steps the decoder over
sequence slots; everything that chooses tokens is Python, in this package.
"""
from __future__ import annotations

import os

import numpy as np

from akunu.tokenizer import Tokenizer
from akunu.whisper import audio_input
from akunu.whisper.alignment import attention_matrix, default_heads, dtw
from akunu.whisper.language import detect_languages
from akunu.whisper.longform import Clip, make_rules, pad_or_trim, run_round
from akunu.whisper.mel_frames import WholeMel, WindowedMel
from akunu.whisper.options import TranscribeOptions
from akunu.whisper.result import Transcription
from akunu.whisper.rules import log_softmax
from akunu.whisper.tokens import WhisperTokens

NOT_BUILT = "the Whisper engine is not built in this checkout (akunu._akunu has no WhisperModel)"
MIN_SAMPLES = 400  # the STFT's reflect padding needs more samples than half a frame
WHOLE_MEL_SECONDS = 30.0  # longer clips: the spectrogram window by window (mel_frames.py)
BLOCK = 10 * 16000  # samples per block of an array's stream


def engine_available() -> bool:
    from akunu import _akunu

    return hasattr(_akunu, "WhisperModel")


class Whisper:
    """A loaded Whisper model. engine: an object with `_akunu.WhisperModel`'s interface to use
    instead of loading one (tests pass a reference implementation)."""

    def __init__(self, path, device: str | None = None, max_sequences: int = 8, tuning: str = "",
                 progress: bool | None = None, engine=None):
        if engine is None:
            from akunu import _akunu

            if not engine_available():
                raise _akunu.Error(f"{path}: {NOT_BUILT}")
            engine = _akunu.WhisperModel.load(os.fspath(path), device or "", tuning or "", max_sequences, progress)
        self.path = os.fspath(path)
        self.engine = engine
        self.config = dict(engine.config)
        self.max_sequences = max_sequences
        self.tokenizer = engine.tokenizer
        if not isinstance(self.tokenizer, Tokenizer):  # the native one: wrap it as akunu.Tokenizer
            self.tokenizer = Tokenizer(self.tokenizer)
        self.tokens = WhisperTokens(self.tokenizer, self.config["n_vocab"])
        layers = self.config["decoder_layers"]
        heads = self.config.get("heads") or self.config["decoder_attention_heads"]
        given = [list(h) for h in (self.config.get("alignment_heads") or [])]
        valid = [h for h in given if 0 <= h[0] < layers and 0 <= h[1] < heads]
        self.alignment_heads = valid if valid and len(valid) == len(given) else default_heads(layers, heads)

    def __repr__(self) -> str:
        c = self.config
        return (f"Whisper({self.path!r}, {c.get('format', '?')}, d_model={c['d_model']}, "
                f"layers={c['encoder_layers']}+{c['decoder_layers']}, multilingual={self.tokens.multilingual})")

    @property
    def n_text_ctx(self) -> int:
        """Text positions of the decoder (448 for OpenAI's models): prompt and output together."""
        return int(self.config["n_text_ctx"])

    # ------------------------------------------------------------ the pieces, for inspection

    def mel(self, audio, sample_rate: int | None = None) -> np.ndarray:
        """The log-mel spectrogram [n_mels, n // 160] of audio (a path or samples)."""
        x = audio_input.samples(audio, sample_rate)
        return self.engine.mel(np.pad(x, (0, max(0, MIN_SAMPLES - x.size))))[:, :x.size // 160]

    def encode(self, mel: np.ndarray) -> np.ndarray:
        """Encoder output [B, 1500, d_model] of mel [n_mels, frames] (padded or cut to 30 s) or
        of a batch [B, n_mels, 3000]."""
        mel = np.asarray(mel, np.float32)
        return self.engine.encode(np.ascontiguousarray(pad_or_trim(mel) if mel.ndim == 2 else mel))

    def logits(self, mel: np.ndarray, tokens: list[int], seq: int = 0) -> np.ndarray:
        """Decoder logits [len(tokens), n_vocab] of tokens for a 30-s window's mel; afterwards
        cross_attention(layer) and kv(layer) show that step."""
        self.encode(mel)
        self.engine.set_audio(seq, 0)
        self.engine.reset(seq)
        return np.array(self.engine.decode([seq], [list(tokens)], all_logits=True))

    def cross_attention(self, layer: int) -> np.ndarray:
        """Softmax weights [rows of the last decode, heads, 1500] of decoder layer `layer`."""
        return self.engine.cross_attention(layer)

    def kv(self, layer: int, seq: int = 0):
        """(k, v) [heads, length, head_dim] of sequence slot `seq`'s self-attention."""
        return self.engine.kv(seq, layer)

    def profile(self, what: str = "decoder") -> list[dict]:
        """Device time of each command of the last encoder pass (what="encoder") or the last
        decoder step ("decoder"), replayed with GPU timestamps (on the CPU backend, the host
        clock between commands): [{label, kernel, spec, ms, bytes_bound}], as Model.profile gives.
        The replay recomputes what that call computed, so nothing changes; on a GPU untimed
        replays first keep it at its clocks. akunu.profile_table() sums the rows by kernel
        class."""
        return self.engine.profile(what)

    def alignment(self, mel: np.ndarray, text_tokens: list[int]) -> dict:
        """For a window's mel and its text tokens: the alignment heads' matrix [tokens + 1,
        frames // 2], the DTW path through it and each text token's probability."""
        prefix = self.tokens.sot_sequence + [self.tokens.no_timestamps]
        logits = self.logits(mel, prefix + list(text_tokens) + [self.tokens.eot])
        frames = min(np.asarray(mel).shape[-1], 3000)
        weights = np.stack([self.cross_attention(layer)[:, h, :] for layer, h in self.alignment_heads])
        matrix = attention_matrix(weights, frames)[len(prefix) - 1:-1]
        text_idx, time_idx = dtw(-matrix)
        probs = np.exp(log_softmax(logits[len(prefix) - 1:-2]))[np.arange(len(text_tokens)), text_tokens]
        return dict(matrix=matrix, path=(text_idx, time_idx), token_probs=probs)

    def detect_language(self, audio, sample_rate: int | None = None) -> tuple[str, float, dict[str, float]]:
        """(code, probability, all codes' probabilities) from the first 30 s of audio."""
        if not self.tokens.multilingual:
            return "en", 1.0, {"en": 1.0}
        self.encode(self.mel(audio, sample_rate))
        return detect_languages(self.engine, self.tokens, [0], self.max_sequences)[0]

    # ------------------------------------------------------------ transcription

    def transcribe(self, audio, sample_rate: int | None = None, **options):
        """Text, segments and (optionally) word timestamps of audio: a path, samples at 16 kHz
        (or at sample_rate), or a list of those, transcribed together (a list of results).
        Options: akunu.whisper.TranscribeOptions (beam_size, temperature, timestamps,
        word_timestamps, language, condition_on_previous_text, ...)."""
        opts = TranscribeOptions.from_kwargs(**options)
        many = isinstance(audio, (list, tuple))
        clips = [self._clip_mel(a, sample_rate) for a in (audio if many else [audio])]
        results = self._transcribe(clips, opts)
        return results if many else results[0]

    def _clip_mel(self, audio, sample_rate):
        """The clip's spectrogram as the windows read it: whole for a clip of up to
        WHOLE_MEL_SECONDS, else window by window from a stream (mel_frames.py), so that memory
        does not grow with the clip's length."""
        seconds = audio_input.duration(audio)
        if seconds is not None and seconds > WHOLE_MEL_SECONDS:
            return WindowedMel(self.engine, lambda: audio_input.stream(audio))
        x = audio_input.samples(audio, sample_rate)
        if x.size > WHOLE_MEL_SECONDS * audio_input.SAMPLE_RATE:
            return WindowedMel(self.engine, lambda: iter(np.split(x, range(BLOCK, x.size, BLOCK))))
        return WholeMel(self.engine.mel(np.pad(x, (0, 160 + max(0, MIN_SAMPLES - x.size)))), x.size)

    def _transcribe(self, clips: list, opts: TranscribeOptions) -> list[Transcription]:
        base = self.tokens.with_language(opts.language, opts.task)
        initial = opts.initial_prompt
        initial = base.encode(" " + initial.strip()) if isinstance(initial, str) else list(initial or [])
        states = [Clip(mel, base, initial) for mel in clips]
        languages = self._languages(states, opts)
        for clip, (code, _) in zip(states, languages):
            clip.tokens = base.with_language(code, opts.task)
        rules = make_rules(base, opts, self.config.get("begin_suppress_tokens"))
        rng = np.random.default_rng(opts.seed)
        width = max(opts.beam_size, opts.best_of if any(t > 0 for t in opts.temperatures) else 1)
        per_round = max(1, self.max_sequences // width)
        while running := [c for c in states if c.running]:
            for start in range(0, len(running), per_round):
                run_round(self.engine, base, running[start:start + per_round], opts, rules, rng, self.max_sequences,
                          self.n_text_ctx, self.alignment_heads)
        return [Transcription("".join(s.text for s in c.segments), c.segments, code, prob, c.mel.n_samples / 16000)
                for c, (code, prob) in zip(states, languages)]

    def _languages(self, states, opts) -> list[tuple[str, float]]:
        if opts.language is not None or not self.tokens.multilingual:
            return [(opts.language or "en", 1.0)] * len(states)
        out = [("en", 1.0)] * len(states)
        todo = [i for i, c in enumerate(states) if c.content_frames > 0]
        for start in range(0, len(todo), self.max_sequences):
            chunk = todo[start:start + self.max_sequences]
            self.engine.encode(np.stack([states[i].window()[0] for i in chunk]))
            found = detect_languages(self.engine, self.tokens, list(range(len(chunk))), self.max_sequences)
            for i, (code, prob, _) in zip(chunk, found):
                out[i] = (code, prob)
        return out
