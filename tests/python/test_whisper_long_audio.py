"""Long audio in bounded memory (akunu/whisper/mel_frames.py, audio_input.stream): the
spectrogram computed window by window from a stream of blocks equals the whole clip's, a file
decodes (and resamples) block by block as loading it whole does, and the memory transcribe
takes does not grow from a 2-minute clip to a 20-minute one. The model is the random fixture's
(its mel and a tiny encoder), on the CPU backend."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import akunu
from akunu.audio import load_audio
from akunu.whisper import audio_input, mel_frames
from support.fixture_paths import require

soundfile = pytest.importorskip("soundfile", reason="files are decoded with soundfile")


@pytest.fixture(scope="module")
def fixtures():
    return require("whisper")


@pytest.fixture(scope="module")
def whisper(fixtures):
    return akunu.load(str(fixtures / "tiny-whisper-random" / "hf"), device="cpu", max_sequences=1)


def test_windowed_mel_equals_the_whole_clip_mel(whisper, fixtures):
    """long.wav (41.8 s) in blocks of an odd size, the first pass in blocks of 1,000 frames;
    windows at the clip's start, within a frame of it, at odd places and at its end."""
    path = fixtures / "audio" / "long.wav"
    x = load_audio(path)
    whole = whisper.engine.mel(np.pad(x, (0, 160)))
    m = mel_frames.WindowedMel(whisper.engine, lambda: audio_input.stream(path, 7777), block_frames=1000)
    assert (m.n_samples, m.content_frames) == (x.size, x.size // 160)
    for start in (0, 1, 2, 3, 1234, 2900, m.content_frames - 8):
        size = min(3000, m.content_frames - start)
        # float32 results of the same kernels on the same frames: equal but for the floor's
        # value, (M - 4) / 4 computed once on the host and once in the kernel
        np.testing.assert_allclose(m.frames(start, size), whole[:, start:start + size], rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="forward only"):
        m.frames(0, 10)


def test_a_file_streams_as_it_loads_whole_resampled_or_not(tmp_path, fixtures):
    """jfk.wav as it is, and as a 22.05-kHz stereo file (channels averaged, then soxr)."""
    soxr = pytest.importorskip("soxr", reason="other sample rates are resampled with soxr")
    x = load_audio(fixtures / "audio" / "jfk.wav")
    stereo = tmp_path / "stereo_22k.wav"
    soundfile.write(stereo, np.stack([soxr.resample(x, 16000, 22050), soxr.resample(0.5 * x, 16000, 22050)], axis=1),
                    22050, subtype="FLOAT")
    for path in (fixtures / "audio" / "jfk.wav", stereo):
        whole = load_audio(path)
        streamed = np.concatenate(list(audio_input.stream(path, 5000)))
        np.testing.assert_allclose(streamed, whole, rtol=0, atol=1e-6)


def _noise_wav(path, minutes: float) -> str:
    """Low noise (16-bit PCM, 16 kHz), written a minute at a time."""
    rng = np.random.default_rng(0)
    with soundfile.SoundFile(path, "w", 16000, 1, "PCM_16") as f:
        for _ in range(int(minutes)):
            f.write((rng.normal(size=16000 * 60) * 0.01).astype(np.float32))
    return str(path)


def _peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_transcribe_memory_does_not_grow_with_the_clip(whisper, tmp_path):
    """Python's peak allocation (NumPy's arrays included) during transcribe of a file: a clip
    ten times as long takes the same memory, well under its 73 MiB of float32 samples."""
    short, long = _noise_wav(tmp_path / "2min.wav", 2), _noise_wav(tmp_path / "20min.wav", 20)
    run = lambda path: whisper.transcribe(path, max_new_tokens=1, condition_on_previous_text=False)  # noqa: E731
    run(short)  # first use: the spectrogram's buffers, the tokenizer's caches
    peaks = {p: _peak_mib(lambda p=p: run(p)) for p in (short, long)}
    assert peaks[long] < peaks[short] + 4.0, peaks
    assert peaks[long] < 32.0, peaks


def test_an_array_of_long_audio_is_windowed_too(whisper):
    x = (np.random.default_rng(1).normal(size=16000 * 75) * 0.01).astype(np.float32)
    r = whisper.transcribe(x, max_new_tokens=1)
    assert isinstance(whisper._clip_mel(x, None), mel_frames.WindowedMel)
    assert r.duration == pytest.approx(75.0)
