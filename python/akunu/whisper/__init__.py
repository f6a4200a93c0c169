"""Whisper speech recognition on akunu: transcription with OpenAI whisper's and
faster-whisper's decoding rules (greedy, beam search, temperature fallback, timestamps, long
audio in 30-s windows, word timestamps, language detection), several clips at once.
See docs/whisper.md."""
from __future__ import annotations

from akunu.whisper.longform import pad_or_trim
from akunu.whisper.model import Whisper, engine_available
from akunu.whisper.options import TranscribeOptions
from akunu.whisper.result import Segment, Transcription, Word

__all__ = ["Whisper", "TranscribeOptions", "Transcription", "Segment", "Word", "pad_or_trim", "engine_available"]
