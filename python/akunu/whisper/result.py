"""What Whisper.transcribe returns: the text, its segments and their words."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Word:
    """A word (with its leading space and punctuation), when it is said and how likely it is."""

    word: str
    start: float  # seconds from the start of the audio
    end: float
    probability: float


@dataclass
class Segment:
    """A stretch of speech between two timestamps (or a whole window without timestamps), with
    the decoding figures of its window: temperature, avg_logprob, compression_ratio and
    no_speech_prob."""

    id: int
    seek: int  # the window's first mel frame
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: list[Word] | None = None


@dataclass
class Transcription:
    """What transcribe() returns: the text, its segments, the language and its probability
    (1.0 when given or English-only) and the audio's duration."""

    text: str
    segments: list[Segment] = field(default_factory=list)
    language: str = "en"
    language_probability: float = 1.0
    duration: float = 0.0  # seconds of audio

    def to_dict(self) -> dict:
        """Plain dicts and lists (for JSON)."""
        return asdict(self)

    def __str__(self) -> str:
        return self.text
