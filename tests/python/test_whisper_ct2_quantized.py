"""CTranslate2's quantized Whisper files: the random HF fixture converted at test time by
CTranslate2's own converter (int8_float32, int8_float16, int16), loaded by akunu on both
backends and compared with CTranslate2 running the same file.

References: CTranslate2 with compute_type="float32" dequantizes the file's integer weights to
float32 when it loads them and computes in float32, so akunu (which dequantizes at load too)
meets it at float32 rounding where the file's floats are float32, and at the f16 rounding of
its dequantized weights where they are half precision. CTranslate2's own int8 compute (int8
GEMMs on activations quantized per row) is a looser second reference."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import require

ctranslate2 = pytest.importorskip("ctranslate2", reason="CTranslate2 (with faster-whisper) converts the files")
pytestmark = pytest.mark.usefixtures("backend")

# Encoder states and logits are of order 1 (fixture README). float32 weights: float32 rounding
# in another order; f16 weights: each weight moves by up to 2^-12 of itself.
TOLERANCE = {"int8_float32": 5e-4, "int16": 5e-4, "int8_float16": 5e-3}
INT8_COMPUTE = 0.1  # CTranslate2's int8 GEMMs quantize activations to 8 bits per row


@pytest.fixture(scope="module")
def fixtures():
    return require("whisper")


def convert(fixtures, out, quantization: str) -> str:
    if not (out / "model.bin").exists():
        conv = ctranslate2.converters.TransformersConverter(str(fixtures / "tiny-whisper-random" / "hf"),
                                                            copy_files=["tokenizer.json"])
        conv.convert(str(out), quantization=quantization, force=True)
    return str(out)


@pytest.fixture(scope="module", params=sorted(TOLERANCE))
def quantized(request, fixtures, tmp_path_factory):
    return request.param, convert(fixtures, tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="module")
def mel(fixtures):
    return np.load(fixtures / "tiny-en" / "jfk_mel.npy")


def ct2_encode(path: str, mel: np.ndarray, compute_type: str) -> np.ndarray:
    m = ctranslate2.models.Whisper(path, device="cpu", compute_type=compute_type)
    return np.array(m.encode(ctranslate2.StorageView.from_array(mel[None]), to_cpu=True))[0]


def test_int_weights_are_dequantized_as_ctranslate2_does(quantized):
    kind, path = quantized
    files = akunu.open(path)
    dtypes = {t["dtype"] for t in files.tensors}
    assert dtypes <= {"F32", "F16"}, dtypes
    assert ("F16" in dtypes) == (kind == "int8_float16")


def test_encoder_matches_ctranslate2_on_the_same_file(quantized, mel):
    kind, path = quantized
    w = akunu.load(path, max_sequences=1)
    got = w.encode(mel)[0]
    want = ct2_encode(path, mel, "float32")
    np.testing.assert_allclose(got, want, atol=TOLERANCE[kind], rtol=0)
    if kind.startswith("int8"):
        int8 = ct2_encode(path, mel, "int8_float32")
        assert np.abs(got - int8).max() < INT8_COMPUTE * np.abs(int8).max()


def test_logits_match_ctranslate2_generate_scores(quantized, mel):
    """The decoder: akunu's greedy tokens and their log-probabilities against CTranslate2's
    greedy generate on the same file (float32 compute)."""
    kind, path = quantized
    m = ctranslate2.models.Whisper(path, device="cpu", compute_type="float32")
    prompt = [50257, 50362]
    r = m.generate(ctranslate2.StorageView.from_array(mel[None]), [prompt], beam_size=1, max_length=12,
                   return_scores=True, return_logits_vocab=True, suppress_blank=False, suppress_tokens=[])[0]
    want = np.array([np.array(x) for x in r.logits[0]]).reshape(-1, 51864)
    tokens = r.sequences_ids[0]
    w = akunu.load(path, max_sequences=1)
    got = w.logits(mel, prompt + tokens)[len(prompt) - 1:len(prompt) - 1 + len(want)]
    np.testing.assert_allclose(got, want, atol=TOLERANCE[kind] * 10, rtol=0)


def test_a_quantized_weight_without_its_scale_is_refused(fixtures, tmp_path):
    """The error names the tensor and what akunu reads."""
    src = convert(fixtures, tmp_path / "src", "int8_float32")
    data = open(f"{src}/model.bin", "rb").read()
    name = b"encoder/layer_0/ffn/linear_0/weight_scale\0"
    assert data.count(name) == 1
    broken = tmp_path / "broken"
    shutil.copytree(src, broken)
    (broken / "model.bin").write_bytes(data.replace(name, b"encoder/layer_0/ffn/linear_0/weight_scalX\0"))
    with pytest.raises(_akunu.Error, match=r"encoder/layer_0/ffn/linear_0/weight is I8 without .*_scale"):
        akunu.load(str(broken))
