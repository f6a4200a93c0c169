"""Whisper's log-mel spectrogram on the engine (engine/whisper_mel.h), both backends, against
transformers' WhisperFeatureExtractor: the fixtures' [80, 3000] mels of 30-s padded clips, and
transformers' own numpy pipeline on odd lengths."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import FIXTURES, requires_fixtures

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]
WHISPER = FIXTURES / "whisper"
FILTERS = _akunu.whisper_mel_filters(80)
# float32 DFT sums against transformers' float64 pipeline, on values in about [-1.5, 1.5]
TOLERANCE = 1e-4


def transformers_log_mel(x: np.ndarray) -> np.ndarray:
    """WhisperFeatureExtractor's numpy path (_np_extract_fbank_features) on an unpadded clip."""
    audio_utils = pytest.importorskip("transformers.audio_utils", reason="transformers is the reference")
    spec = audio_utils.spectrogram(x.astype(np.float64), audio_utils.window_function(400, "hann"), frame_length=400,
                                   hop_length=160, power=2.0, mel_filters=FILTERS.T.astype(np.float64),
                                   log_mel="log10")[:, :-1]
    spec = np.maximum(spec, spec.max() - 8.0)
    return ((spec + 4.0) / 4.0).astype(np.float32)


@pytest.mark.parametrize("clip", ["jfk", "weather"])
def test_padded_clips_match_the_fixture_mels(backend, clip):
    from akunu.audio import load_audio
    x = load_audio(WHISPER / "audio" / f"{clip}.wav")
    x = np.pad(x, (0, 480000 - len(x)))  # 30 s, as the feature extractor pads
    got = _akunu.whisper_log_mel(x, FILTERS, device=backend)
    want = np.load(WHISPER / "tiny-en" / f"{clip}_mel.npy")
    assert got.shape == want.shape == (80, 3000)
    np.testing.assert_allclose(got, want, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("n", [201, 401, 1234, 16000 + 37])
def test_odd_lengths_match_transformers(backend, n):
    rng = np.random.default_rng(n)
    x = (0.3 * rng.standard_normal(n)).astype(np.float32)
    got = _akunu.whisper_log_mel(x, FILTERS, device=backend)
    want = transformers_log_mel(x)
    assert got.shape == want.shape == (80, n // 160)
    np.testing.assert_allclose(got, want, atol=TOLERANCE, rtol=0)


def test_bad_input_is_refused(backend):
    with pytest.raises(akunu.Error, match="200 samples; this spectrogram takes 201 to"):
        _akunu.whisper_log_mel(np.zeros(200, np.float32), FILTERS, device=backend)
    x = np.zeros(1000, np.float32)
    x[3] = np.nan
    with pytest.raises(akunu.Error, match="sample 3 is not finite"):
        _akunu.whisper_log_mel(x, FILTERS, device=backend)
    with pytest.raises(akunu.Error, match="filters must be float32 \\[n_mels, 201\\]"):
        _akunu.whisper_log_mel(np.zeros(1000, np.float32), FILTERS[:, :200], device=backend)
