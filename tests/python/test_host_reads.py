"""Reading a model's insides on the host: Model.eval's logits as an array of its own, and copies
of the KV cache's and the scratch buffers' views (copy=True, scratch.read), read through the
staging area where a discrete GPU maps its memory uncached (bench/NOTES.md). The copies must
hold what the views hold, and no later step may change them."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")


def test_eval_returns_the_logits_as_its_own_array(backend):
    """eval's logits are the logits scratch buffer's values, read into an array of their own (on
    a discrete GPU through the staging area: the mapped buffer reads uncached); the next step
    overwrites the buffer, not them."""
    m = akunu.Model(require("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf"), context=256, progress=False)
    first = m.eval(m.tokenize("abc"))
    assert first.shape == (2048,) and first.dtype == np.float32
    np.testing.assert_array_equal(first, m.scratch["logits"])
    assert not np.shares_memory(first, m.scratch["logits"])
    kept = first.copy()
    second = m.eval(m.tokenize(" d"), reset=False)
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_array_equal(second, m.scratch["logits"])
    assert not np.array_equal(first, second)
    again, _ = m.eval(m.tokenize("abc"), hidden_states=[0])
    np.testing.assert_array_equal(again, first)  # the same prompt from an empty cache: the same logits


@pytest.mark.parametrize("kv_dtype,kv_alloc", [("f16", "full"), ("q8/int4", "full"), ("int4h", "blocks")])
def test_copies_of_the_views_hold_what_the_views_hold(backend, kv_dtype, kv_alloc):
    """copy=True (the KV cache) and scratch.read (the scratch buffers) read through the staging
    area into arrays of their own: the views' values, which the next step does not change; the
    dequantized rows come from copies too, and equal those of the views."""
    m = akunu.Model(require("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf"), context=256, progress=False,
                    kv_dtype=kv_dtype, kv_alloc=kv_alloc)
    m.eval(m.tokenize("abc def"))
    kv = m.kv_cache
    for layer in (0, m.config.n_layers - 1):
        for side in (kv.k, kv.v):
            view, copied = side(layer), side(layer, copy=True)
            np.testing.assert_array_equal(view, copied)
            assert copied.shape == view.shape and copied.dtype == view.dtype
            if kv_alloc == "full":
                assert not np.shares_memory(view, copied)
            np.testing.assert_array_equal(side(layer, dequantize=True), side(layer, dequantize=True, copy=True))
        if kv_dtype != "f16":
            np.testing.assert_array_equal(kv.k_scales(layer), kv.k_scales(layer, copy=True))
            np.testing.assert_array_equal(kv.v_scales(layer), kv.v_scales(layer, copy=True))
    for name in ("h0", "logits"):
        np.testing.assert_array_equal(m.scratch.read(name), m.scratch[name])
    kept_k, kept_h = kv.k(0, copy=True), m.scratch.read("h0")
    before_k, before_h = kept_k.copy(), kept_h.copy()
    m.eval(m.tokenize(" ghi"), reset=False)
    np.testing.assert_array_equal(kept_k, before_k)
    np.testing.assert_array_equal(kept_h, before_h)
