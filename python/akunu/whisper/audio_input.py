"""Audio given to Whisper, as 16 kHz mono float32 samples: a file path or an array. Files and
other rates go through akunu.audio.load_audio (decoding and resampling) where it is present."""
from __future__ import annotations

import os

import numpy as np

SAMPLE_RATE = 16000


def _load_audio():
    try:
        from akunu.audio import load_audio
    except ImportError:
        return None
    return load_audio


def samples(audio, sample_rate: int | None = None) -> np.ndarray:
    """float32 [n] at 16 kHz; a clear ValueError for what cannot be used."""
    load = _load_audio()
    if isinstance(audio, (str, os.PathLike)):
        if not os.path.exists(audio):
            raise FileNotFoundError(f"{audio}: no such audio file")
        if load is not None:
            return _check(load(os.fspath(audio)), audio)
        try:
            import soundfile
        except ImportError:
            raise ValueError(f"{audio}: reading audio files needs akunu.audio or the soundfile package "
                             "(pip install soundfile)") from None
        data, rate = soundfile.read(os.fspath(audio), dtype="float32", always_2d=True)
        data, sample_rate = data.mean(axis=1), rate
        audio = data
    x = np.asarray(audio)
    if x.dtype.kind not in "fiu":
        raise ValueError(f"audio of dtype {x.dtype}: expected float samples in [-1, 1]")
    if x.ndim == 2 and 1 in x.shape:
        x = x.reshape(-1)
    if x.ndim != 1:
        raise ValueError(f"audio of shape {x.shape}: expected mono samples [n] (mix channels down first)")
    if sample_rate not in (None, SAMPLE_RATE):
        if load is None:
            raise ValueError(f"audio at {sample_rate} Hz: Whisper needs {SAMPLE_RATE} Hz; resample it first")
        x = load(x.astype(np.float32), sample_rate=sample_rate)
    return _check(x.astype(np.float32), "audio")


def _check(x: np.ndarray, what) -> np.ndarray:
    bad = int(np.count_nonzero(~np.isfinite(x)))
    if bad:
        raise ValueError(f"{what}: {bad} of {x.size} samples are NaN or infinite")
    return np.ascontiguousarray(x, np.float32)
