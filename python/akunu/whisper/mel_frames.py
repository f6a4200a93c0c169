"""A clip's log-mel spectrogram as the windows read it, in memory that does not grow with the
clip's length.

A short clip's spectrogram is computed whole (`WholeMel`). A long one (`WindowedMel`) is never
held whole: its samples come as a forward stream of blocks (a file decoded block by block, or
slices of an array), and each window's frames are computed when the window is decoded, from
its samples and two frames of context on either side. Whisper's spectrogram is not local,
though: its floor is the clip's loudest value minus 8 (log10 units). So a first pass over the
stream finds that maximum, block by block, and each window's frames, which the engine floors
at the window's own maximum minus 8, are raised to the clip's floor:

    mel = (max(x, m - 8) + 4) / 4   (m: the maximum over the frames computed together)

and with M >= m,  max(mel_window, (M - 4) / 4) = (max(x, M - 8) + 4) / 4.

This equals the whole-clip spectrogram up to float rounding, unless a frame at a window's
edge, reflect-padded there and not a true frame, is louder than the whole clip: then only
values within that excess of the floor (80 dB under the loudest sound) differ.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

HOP = 160  # samples per mel frame
CONTEXT = 2  # frames of context on either side of a window: a frame spans 400 samples
BLOCK_FRAMES = 3000  # frames per block of the first pass (30 s)


class WholeMel:
    """The spectrogram [n_mels, frames] of a clip of n_samples, computed at once."""

    def __init__(self, mel: np.ndarray, n_samples: int):
        self.mel, self.n_samples, self.content_frames = mel, n_samples, n_samples // HOP

    def frames(self, start: int, size: int) -> np.ndarray:
        return self.mel[:, start:start + size]


class _Reader:
    """Samples [a, b) of a forward stream of float32 blocks followed by `tail` zeros, for
    requests whose a never goes back; holds only the samples a later request can reach."""

    def __init__(self, blocks: Iterator[np.ndarray], tail: int):
        self._blocks, self._tail = blocks, tail
        self._buf, self._start = np.zeros(0, np.float32), 0
        self.total: int | None = None  # the stream's length (tail included), once it ended

    def read(self, a: int, b: int) -> np.ndarray:
        if a < self._start:
            raise ValueError(f"the audio stream is read forward only: samples from {a} were dropped")
        parts, have = [self._buf], self._start + self._buf.size
        while have < b and self.total is None:
            block = next(self._blocks, None)
            if block is None:
                block, self.total = np.zeros(self._tail, np.float32), have + self._tail
            parts.append(block)
            have += block.size
        buf = np.concatenate(parts) if len(parts) > 1 else parts[0]
        cut = min(a - self._start, buf.size)
        self._buf, self._start = buf[cut:], self._start + cut
        return self._buf[:max(0, b - a)]


class WindowedMel:
    """The spectrogram of a long clip, frames computed window by window from a stream.

    engine: has .mel(samples) (akunu's WhisperModel); stream: a function that starts the clip's
    16-kHz samples anew as an iterator of float32 blocks (it is called twice). The clip is
    padded with one frame of zeros, as a whole clip is before its spectrogram."""

    def __init__(self, engine, stream: Callable[[], Iterator[np.ndarray]], block_frames: int = BLOCK_FRAMES):
        self._engine, self._stream = engine, stream
        self.top, total = self._loudest(block_frames)
        self.n_samples = total - HOP
        self.content_frames = self.n_samples // HOP
        self._reader = _Reader(stream(), HOP)

    def _chunk(self, reader: _Reader, start: int, size: int) -> tuple[np.ndarray, int]:
        """The engine's frames [start, start + size) (fewer at the end) and how many."""
        lead = min(CONTEXT, start)
        x = reader.read(HOP * (start - lead), HOP * (start + size + CONTEXT))
        n = size if reader.total is None else min(size, reader.total // HOP - start)
        return self._engine.mel(x)[:, lead:lead + n], n

    def _loudest(self, block: int) -> tuple[float, int]:
        """The largest normalised value over every frame of the clip, and the padded clip's
        length in samples: the first pass."""
        reader, top, start = _Reader(self._stream(), HOP), -np.inf, 0
        while reader.total is None or start < reader.total // HOP:
            y, n = self._chunk(reader, start, block)
            if n > 0:
                top = max(top, float(y.max()))
            start += block
        return top, reader.total

    def frames(self, start: int, size: int) -> np.ndarray:
        """mel [n_mels, size] of frames [start, start + size); start never goes back."""
        y, _ = self._chunk(self._reader, start, size)
        return np.maximum(y, np.float32(self.top - 2.0))  # (M - 8 + 4) / 4 with M = 4 top - 4
