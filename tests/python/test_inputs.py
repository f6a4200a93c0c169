"""What Model's calls take and what they do with it (akunu/_inputs.py and Model): the context
rule shared by Model, plan and bench, prompts as text, ids, arrays, tensors and BatchEncodings,
eval starting fresh unless told to continue, stop strings, and a stop token that comes first."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(scope="module")
def path():
    return require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")  # trained for 512 positions


@pytest.fixture(scope="module")
def m(path):
    return akunu.Model(path, context=128, progress=False)


def test_a_context_past_the_trained_length_is_clipped_with_a_warning(path):
    with pytest.warns(akunu.ContextWarning, match=r"context 131072 clipped to 512, the positions the model was "):
        big = akunu.Model(path, context=131072, progress=False)
    assert big.context == 512
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert akunu.Model(path, progress=False).context == 512  # the default: 4096, or the trained length
        assert akunu.Model(path, context=300, progress=False).context == 300
        assert akunu.plan(path).context == 512
    with pytest.warns(akunu.ContextWarning, match="context 8192 clipped to 512"):
        p = akunu.plan(path, context=8192)
    assert p.context == 512 and p.kv_bytes == akunu.plan(path, context=512).kv_bytes


def test_eval_starts_fresh_unless_told_to_continue(m):
    ids = m.tokenize("def add(a, b):\n    return a + b\n")
    want = m.eval(ids).copy()
    m.generate("import os\n", max_tokens=5)
    np.testing.assert_array_equal(m.eval(ids), want)  # what generate left does not leak in
    assert m.kv_cache.current_length == len(ids)
    m.eval(ids[:5])
    np.testing.assert_array_equal(m.eval(ids[5:], reset=False), want)  # a continuation
    m.eval(ids[:5])
    np.testing.assert_array_equal(m.eval(ids[5:], continue_=True), want)  # the same, by its other name
    assert m.kv_cache.current_length == len(ids)


def test_prompts_as_text_arrays_tensors_and_batch_encodings(m):
    ids = m.tokenize("x = [1, 2, 3]\n")
    want = m.eval(ids).copy()
    forms = [np.array(ids), np.array([ids], dtype=np.int32), {"input_ids": [ids]}, "x = [1, 2, 3]\n"]
    try:  # the transformers forms where torch and transformers are installed
        import torch
        forms += [torch.tensor([ids]), torch.tensor(ids)]
        from transformers import BatchEncoding
        forms.append(BatchEncoding({"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids))}))
    except ImportError:
        pass
    for form in forms:
        np.testing.assert_array_equal(m.eval(form), want, err_msg=type(form).__name__)
    assert m.generate(np.array([ids]), max_tokens=3, stream=False).token_ids
    with pytest.raises(TypeError, match="a list of 2 prompts; a Model runs one sequence at a time"):
        m.eval(["a", "b"])
    with pytest.raises(TypeError, match=r"shape 2x3, dtype int64 \(a batch of several sequences"):
        m.eval(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(TypeError, match="expected a str, or one sequence of token ids"):
        m.eval([0.5, 1.5])


def test_stop_is_a_string_or_a_list_of_strings(m):
    ids = m.tokenize("def f(x):\n")
    full = m.generate(ids, max_tokens=24, stream=False).text
    target = full[4:7]  # a few characters that appear once generation is under way
    assert len(target) == 3 and target.strip(), full
    got = m.generate(ids, max_tokens=24, stop=target, stream=False)
    assert got.stop_reason == "stop_string" and got.text == full[: full.index(target)]
    assert m.generate(ids, max_tokens=24, stop=[target], stream=False).text == got.text
    assert m.generate(ids, max_tokens=24, stop=target[0] + "\x00", stream=False).text == full  # not its characters
    with pytest.raises(TypeError, match="stop: expected a non-empty string"):
        m.generate(ids, stop=[""])


def test_a_stop_token_first_says_so(m, monkeypatch):
    ids = m.tokenize("def f(x):\n")
    first = int(m.eval(ids).argmax())
    monkeypatch.setattr(type(m.tokenizer), "stop_ids", property(lambda self: [first]))
    got = m.generate(ids, max_tokens=8, stream=False)
    assert got.token_ids == [] and got.stop_reason == "stop_token"
    assert "the first token sampled was a stop token, so nothing was generated" in got.summary()
    assert got.prompt_tokens_per_second > 0 and "0 generated" not in got.summary()


def test_integer_arguments_past_a_c_int_are_clear_errors(m):
    """chain=2**40, prefill_chunk=2**64, truncate(2**40) and id_to_token(2**40) used to reach
    pybind11 and come back as "incompatible function arguments" with its list of signatures."""
    calls = {"chain": lambda: akunu.Model(m.path, context=32, chain=2**40, progress=False),
             "prefill_chunk": lambda: akunu.Model(m.path, context=32, prefill_chunk=2**64, progress=False),
             "truncate: n": lambda: m.kv_cache.truncate(2**40),
             "id_to_token: token id": lambda: m.tokenizer.id_to_token(2**40),
             "is_special: token id": lambda: m.tokenizer.is_special(-1)}
    for name, call in calls.items():
        with pytest.raises((ValueError, TypeError), match=name) as e:
            call()
        assert "incompatible" not in str(e.value)
    with pytest.raises(TypeError, match="chain must be an integer, got 1.5"):
        akunu.Model(m.path, context=32, chain=1.5, progress=False)
