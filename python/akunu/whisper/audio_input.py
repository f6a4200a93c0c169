"""Audio given to Whisper, as 16 kHz mono float32 samples: a file path or an array. Files and
other rates go through akunu.audio.load_audio (decoding and resampling) where it is present;
`stream` decodes a long file block by block instead, so that it is never held whole."""
from __future__ import annotations

import os

import numpy as np

SAMPLE_RATE = 16000
STREAM_BLOCK = 10 * SAMPLE_RATE  # frames a file stream decodes at a time


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
    if x.dtype.kind in "iu" and x.dtype.itemsize > 1:  # PCM, scaled as akunu.audio.load_audio scales it
        x = x.astype(np.float32) / np.float32(np.iinfo(x.dtype).max + 1)
    elif x.dtype.kind != "f":
        raise ValueError(f"audio of dtype {x.dtype}: expected float samples in [-1, 1] or int16/int32 PCM")
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


def duration(audio) -> float | None:
    """Seconds of audio in a file that soundfile opens; None for anything else."""
    if not isinstance(audio, (str, os.PathLike)):
        return None
    try:
        import soundfile

        info = soundfile.info(os.fspath(audio))
    except Exception:  # not a file soundfile reads: samples() gives the error
        return None
    return info.frames / info.samplerate if info.samplerate > 0 else None


def stream(path, block: int = STREAM_BLOCK):
    """A file's samples as float32 blocks at 16 kHz: decoded block by block, channels averaged,
    resampled with soxr's streaming resampler (which gives what resampling the whole does)."""
    import soundfile

    with soundfile.SoundFile(os.fspath(path)) as f:
        resampler = None
        if f.samplerate != SAMPLE_RATE:
            try:
                import soxr
            except ImportError:
                raise ValueError(f"{path}: audio at {f.samplerate} Hz needs resampling to {SAMPLE_RATE} Hz, which "
                                 "uses the soxr package (pip install soxr)") from None
            resampler = soxr.ResampleStream(f.samplerate, SAMPLE_RATE, 1, dtype="float32", quality="HQ")
        done = 0
        while True:
            data = f.read(block, dtype="float32", always_2d=True)
            last = data.shape[0] < block
            x = np.ascontiguousarray(data.mean(axis=1), np.float32)
            bad = np.flatnonzero(~np.isfinite(x))
            if bad.size:
                raise ValueError(f"{path}: sample {done + int(bad[0])} is NaN or infinite")
            done += x.size
            if resampler is not None:
                x = resampler.resample_chunk(x, last=last)
            if x.size:
                yield x
            if last:
                return
