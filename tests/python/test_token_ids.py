"""Token ids are checked one way at every entry point (python/akunu/token_ids.py), and bytes
are UTF-8 text everywhere."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require, requires_fixtures

pytestmark = requires_fixtures


@pytest.fixture(scope="module")
def model():
    return akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf"), context=64,
                       progress=False, device="cpu")


def _entry_points(m):
    return {"eval": m.eval, "score": m.score, "perplexity": m.perplexity,
            "generate": lambda ids: m.generate(ids, max_tokens=2, stream=False), "decode": m.tokenizer.decode}


@pytest.mark.parametrize("ids, error, message", [
    ([5, -1], ValueError, "token id -1 at index 1 is out of range for a vocabulary of"),
    ([5, 10**9], ValueError, "token id 1000000000 at index 1 is out of range"),
    ([5, 2**64], ValueError, "is out of range"),
    ([1.7, 2.2], TypeError, "token id 1.7 at index 0 is not an integer"),
    ([5, "12"], TypeError, "token id '12' at index 1 is not an integer"),
    ([5, True], TypeError, "token id True at index 1 is not an integer"),
    (np.array([5.0, 6.0]), TypeError, "token ids must be integers, got an array of float64"),
])
def test_every_entry_point_checks_ids_the_same_way(model, ids, error, message):
    """score([5, -1]) used to score token vocab - 1 (NumPy's negative index); floats and
    strings were converted silently."""
    for call in _entry_points(model).values():
        with pytest.raises(error, match=message):
            call(ids)
    assert issubclass(akunu.token_ids.TokenIdError, akunu.Error)
    stream = model.tokenizer.stream()
    for bad, error in ((-1, ValueError), (10**9, ValueError), (1.5, TypeError), ("3", TypeError)):
        with pytest.raises(error, match="StreamDecoder.put: token id"):
            stream.put(bad)


def test_numpy_integer_ids_are_ids(model):
    ids = [1, 450, 1996, 871]
    np.testing.assert_allclose(model.score(np.array(ids, np.int32)), model.score(ids))


def test_bytes_are_utf8_text_everywhere(model):
    text = "héllo wörld"
    assert model.generate(text.encode(), max_tokens=3, stream=False).token_ids == \
        model.generate(text, max_tokens=3, stream=False).token_ids
    assert model.perplexity(text.encode()) == pytest.approx(model.perplexity(text), rel=1e-6)
    assert model.tokenizer.encode(text.encode()) == model.tokenizer.encode(text)
    for call in (model.eval, model.score, model.tokenizer.decode):
        with pytest.raises(TypeError, match="got bytes"):
            call(text.encode())
