"""Audio input for Whisper: a file or an array, as float32 mono samples at 16 kHz.

Files are decoded with soundfile (libsndfile: WAV, FLAC, OGG, MP3 where libsndfile has it),
several channels are averaged to one, and other sample rates are resampled with soxr (its
high-quality setting), as OpenAI's whisper and faster-whisper hand the model 16-kHz mono.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np

from akunu._akunu import Error

SAMPLE_RATE = 16000  # Whisper's input rate


def _decode(path: pathlib.Path) -> tuple[np.ndarray, int]:
    try:
        import soundfile
    except ImportError:
        raise Error("reading audio files needs the soundfile package (pip install soundfile); "
                    "or pass the samples as a NumPy array with their sample_rate") from None
    if not path.is_file():
        raise Error(f"'{path}' " + ("is not a regular file" if path.exists() else "does not exist"))
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as e:
        raise Error(f"'{path}' could not be decoded as audio: {e}") from None
    return data, int(rate)


def _resample(x: np.ndarray, rate: int) -> np.ndarray:
    if rate == SAMPLE_RATE:
        return x
    try:
        import soxr
    except ImportError:
        raise Error(f"audio at {rate} Hz needs resampling to {SAMPLE_RATE} Hz, which uses the soxr package "
                    "(pip install soxr)") from None
    return soxr.resample(x, rate, SAMPLE_RATE, quality="HQ").astype(np.float32, copy=False)


def load_audio(audio, sample_rate: int | None = None) -> np.ndarray:
    """float32 [n] mono samples at 16 kHz from a file path or an array.

    `audio`: a path (str or os.PathLike) to decode, or samples as a NumPy array: [n] mono or
    [n, channels] (channels are averaged), floats in [-1, 1] or int16/int32 PCM (scaled to
    floats). `sample_rate`: the array's rate (default 16000); a file's own rate is read from it,
    and passing one for a file is an error. Raises akunu.Error on a file that does not decode,
    on non-finite samples, and on an array of the wrong shape or kind.
    """
    if isinstance(audio, (str, os.PathLike)):
        if sample_rate is not None:
            raise Error("sample_rate is read from the file; pass it only with an array of samples")
        data, rate = _decode(pathlib.Path(audio))
        source = f"'{audio}'"
    else:
        data, rate, source = np.asarray(audio), SAMPLE_RATE if sample_rate is None else sample_rate, "the samples"
        if data.dtype.kind in "iu" and data.dtype.itemsize > 1:
            data = data.astype(np.float32) / float(np.iinfo(data.dtype).max + 1)
        elif data.dtype.kind != "f":
            raise Error(f"audio samples must be floats or int16/int32 PCM, not {data.dtype}")
    if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or not 1000 <= rate <= 768000:
        raise Error(f"sample_rate {rate!r} is not an integer rate in Hz between 1000 and 768000")
    if data.ndim == 2:
        data = data.mean(axis=1)
    elif data.ndim != 1:
        raise Error(f"audio samples must be [n] or [n, channels], not shape {data.shape}")
    data = np.ascontiguousarray(data, dtype=np.float32)
    if not np.isfinite(data).all():
        bad = int(np.flatnonzero(~np.isfinite(data))[0])
        raise Error(f"{source} hold a non-finite value (NaN or infinity) at sample {bad}")
    return _resample(data, int(rate)) if data.size else data
