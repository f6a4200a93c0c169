"""Embeddings from causal language models (Model.embed, akunu.decoder_embed) against
transformers' last_hidden_state of the same weights (float32), pooled the same way, on both
backends. Tolerance on the L2-normalized vectors: 5e-4 for weights equal to the reference's
(measured below 1e-4), 2e-2 for a q8_0 GGUF against the full-precision reference."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require, requires_fixtures

torch = pytest.importorskip("torch", reason="the reference is transformers' forward pass")
transformers = pytest.importorskip("transformers", reason="the reference is transformers' forward pass")

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]

TEXTS = ["def forward(self, x):", "import numpy as np\nx = np.zeros(3)", "a", "class Config:\n    pass\n" * 3]
CASES = [("tiny-qwen3-random", "hf", 5e-4),                                   # HF, tied, q/k norms
         ("tiny-gemma3-random", "hf", 5e-4),                                  # HF stores w: scale 1 + w
         ("tiny-gemma3-random", "gguf/tiny-gemma3-random-f16.gguf", 5e-4),    # GGUF stores w + 1
         ("tiny-llama3-random", "gguf/tiny-llama3-random-q8_0.gguf", 2e-2)]   # quantized weights


@pytest.fixture(scope="module")
def references():
    cache = {}

    def ref(fixture, ids, pooling):
        if fixture not in cache:
            cache[fixture] = transformers.AutoModel.from_pretrained(require(fixture, "hf"), dtype=torch.float32)
        with torch.no_grad():
            h = cache[fixture](torch.tensor([ids])).last_hidden_state[0].numpy().astype(np.float64)
        v = h[-1] if pooling == "last" else h.mean(axis=0)
        return v / np.linalg.norm(v)
    return ref


@pytest.mark.parametrize("fixture, file, atol", CASES)
@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_pooled_hidden_states_match_transformers(references, fixture, file, atol, pooling):
    m = akunu.Model(require(fixture, *file.split("/")), context=256)
    ours = m.embed(TEXTS, pooling=pooling)
    assert ours.shape == (len(TEXTS), m.config.dim) and ours.dtype == np.float32
    want = np.array([references(fixture, m.tokenize(t), pooling) for t in TEXTS])
    np.testing.assert_allclose(ours, want, atol=atol)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_unnormalized_is_a_scaled_copy_and_the_cache_is_left_empty():
    m = akunu.Model(require("tiny-qwen3-random", "hf"), context=256)
    raw = m.embed(TEXTS[:2], normalize=False)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), m.embed(TEXTS[:2]), atol=1e-6)
    assert m.kv_cache.current_length == 0
    alone = m.embed([TEXTS[1]])
    np.testing.assert_allclose(alone[0], m.embed(TEXTS[:2])[1], atol=1e-6)  # a text does not see the others


@pytest.mark.parametrize("texts, pooling, error", [
    ("one string", "last", TypeError), ([], "last", ValueError), ([3], "last", TypeError),
    (["x"], "cls", ValueError), (["word " * 300], "last", ValueError)])
def test_bad_input_raises(texts, pooling, error):
    m = akunu.Model(require("tiny-qwen3-random", "hf"), context=256)
    with pytest.raises(error):
        m.embed(texts, pooling=pooling)
