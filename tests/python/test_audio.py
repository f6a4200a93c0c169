"""akunu.audio.load_audio: files and arrays to 16-kHz mono float32, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import FIXTURES, requires_fixtures

soundfile = pytest.importorskip("soundfile", reason="load_audio's file decoding needs soundfile")
pytest.importorskip("soxr", reason="load_audio's resampling needs soxr")
from akunu.audio import load_audio  # noqa: E402

JFK = FIXTURES / "whisper" / "audio" / "jfk.wav"


def tone(rate: int, seconds: float, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@requires_fixtures
def test_a_16k_mono_wav_reads_as_its_pcm_samples():
    x = load_audio(JFK)
    pcm, rate = soundfile.read(str(JFK), dtype="int16")
    assert rate == 16000 and x.dtype == np.float32 and x.shape == pcm.shape
    np.testing.assert_array_equal(x, pcm.astype(np.float32) / 32768)
    np.testing.assert_array_equal(load_audio(str(JFK)), x)


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_other_rates_are_resampled_to_16k(tmp_path, rate):
    path = tmp_path / f"tone{rate}.wav"
    soundfile.write(str(path), tone(rate, 1.3), rate, subtype="FLOAT")
    x = load_audio(path)
    want = tone(16000, 1.3)
    assert abs(len(x) - len(want)) <= 1
    n = min(len(x), len(want))
    # soxr's filter delay is compensated; away from the ends the tone is the same tone
    np.testing.assert_allclose(x[200:n - 200], want[200:n - 200], atol=2e-3)
    np.testing.assert_allclose(load_audio(tone(rate, 1.3), sample_rate=rate), x, atol=1e-6)


def test_stereo_is_mixed_down_to_the_channel_mean(tmp_path):
    left, right = tone(16000, 0.5, 300), tone(16000, 0.5, 700)
    path = tmp_path / "stereo.wav"
    soundfile.write(str(path), np.stack([left, right], 1), 16000, subtype="FLOAT")
    np.testing.assert_allclose(load_audio(path), (left + right) / 2, atol=1e-7)
    np.testing.assert_allclose(load_audio(np.stack([left, right], 1)), (left + right) / 2, atol=1e-7)


def test_int16_arrays_are_scaled_like_pcm():
    pcm = np.array([0, 16384, -32768, 32767], np.int16)
    np.testing.assert_array_equal(load_audio(pcm), pcm / np.float32(32768))


def test_empty_input_gives_no_samples(tmp_path):
    path = tmp_path / "empty.wav"
    soundfile.write(str(path), np.zeros(0, np.float32), 16000)
    assert load_audio(path).shape == (0,)
    assert load_audio(np.zeros(0, np.float32), sample_rate=44100).shape == (0,)


def test_a_truncated_wav_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.wav"
    soundfile.write(str(path), tone(16000, 0.5), 16000)
    path.write_bytes(path.read_bytes()[:30])  # cut inside the header
    with pytest.raises(akunu.Error, match="cut.wav' could not be decoded as audio"):
        load_audio(path)


def test_nan_and_infinity_are_refused(tmp_path):
    x = tone(16000, 0.1)
    x[7] = np.nan
    with pytest.raises(akunu.Error, match="non-finite value .* at sample 7"):
        load_audio(x)
    path = tmp_path / "nan.wav"
    x[7], x[9] = 0, np.inf
    soundfile.write(str(path), x, 16000, subtype="FLOAT")
    with pytest.raises(akunu.Error, match="nan.wav' hold a non-finite value .* at sample 9"):
        load_audio(path)


@pytest.mark.parametrize("bad, message", [
    (np.zeros((2, 3, 4), np.float32), "must be \\[n\\] or \\[n, channels\\]"),
    (np.array(["a"]), "must be floats or int16/int32 PCM"),
])
def test_bad_arrays_are_refused(bad, message):
    with pytest.raises(akunu.Error, match=message):
        load_audio(bad)


def test_bad_rates_and_missing_files_are_refused(tmp_path):
    with pytest.raises(akunu.Error, match="sample_rate 0 is not"):
        load_audio(np.zeros(4, np.float32), sample_rate=0)
    with pytest.raises(akunu.Error, match="sample_rate is read from the file"):
        load_audio(tmp_path / "x.wav", sample_rate=16000)
    with pytest.raises(akunu.Error, match="x.wav' does not exist"):
        load_audio(tmp_path / "x.wav")
