"""Hidden-state taps (Model.eval(ids, hidden_states=[...])): the residual stream after chosen
layers, against transformers' output_hidden_states on every reference fixture and against the
independent NumPy forward pass; across prefill chunks, beside all-position logits, and without
changing the default tables or what eval returns without taps."""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu
from support.fixture_paths import FIXTURES, require

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

# Residuals of an f32 forward with an f16 KV cache against a float64 reference: max |d| within
# 2e-3 of the tensor's scale (the fixture README's KV tolerance; measured 1e-4 to 4e-4).
REL_TOL = 2e-3

FIXTURE_SOURCES = [
    ("tiny-llama3-random", "hf"),
    ("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf"),
    ("tiny-qwen3-random", "hf"),
    ("tiny-qwen3-random", "gguf/tiny-qwen3-random-f16.gguf"),
    ("tiny-gemma3-random", "hf"),
    ("tiny-gemma3-random", "gguf/tiny-gemma3-random-f16.gguf"),
    ("trained-code-llama", "hf"),
    ("trained-code-llama", "gguf/trained-code-llama-f16.gguf"),
]


def prompt_ids(model, k=0):
    return json.loads(require(model, "manifest.json").read_text())["prompts"][k]["ids"]


def assert_close(got, want, what):
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= REL_TOL, f"{what}: max |d| is {err:.2e} of the tensor's scale"


_HF = {}


def hf_hidden_states(model, ids):
    """transformers' hidden_states for `ids` (float64, eager attention) and its final norm."""
    torch = pytest.importorskip("torch", reason="torch is not installed (scripts/install.sh installs it)")
    transformers = pytest.importorskip("transformers",
                                       reason="transformers is not installed (scripts/install.sh installs it)")
    if model not in _HF:
        _HF[model] = transformers.AutoModelForCausalLM.from_pretrained(
            require(model, "hf"), dtype=torch.float64, attn_implementation="eager").eval()
    hf = _HF[model]
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_hidden_states=True)
    states = [h[0].numpy() for h in out.hidden_states]

    def final_norm(x):
        with torch.no_grad():
            return hf.model.norm(torch.tensor(x, dtype=torch.float64)).numpy()

    return states, final_norm


@pytest.mark.parametrize("model, source", FIXTURE_SOURCES, ids=[f"{m}:{s}" for m, s in FIXTURE_SOURCES])
def test_taps_match_transformers(model, source):
    """transformers' hidden_states has n_layers + 1 entries: [0] is the embedding output, [l + 1]
    the residual after layer l, except the last, which has the final norm applied: our last tap
    (before that norm) goes through transformers' own norm module before it is compared. The
    GGUF llama files' permuted Q/K rows leave the residual stream unchanged."""
    ids = prompt_ids(model)
    want, final_norm = hf_hidden_states(model, ids)
    m = akunu.Model(require(model, source), context=256, progress=False)
    n = m.config.n_layers
    assert len(want) == n + 1
    _, taps = m.eval(ids, hidden_states=range(n))
    for layer in range(n - 1):
        assert taps[layer].shape == (len(ids), m.config.dim) and taps[layer].dtype == np.float32
        assert_close(taps[layer], want[layer + 1], f"layer {layer}")
    assert_close(final_norm(taps[n - 1]), want[n], f"layer {n - 1}, normed")


def test_taps_match_the_numpy_reference():
    """The independent float64 NumPy forward pass (weights read by gguf-py), so the feature is
    checked where transformers is not installed too."""
    pytest.importorskip("gguf", reason="gguf-py reads the weights for the independent reference")
    from support.numpy_llama import NumpyLlama

    path = require("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")
    ids = prompt_ids("trained-code-llama", 1)
    want_logits, want = NumpyLlama(str(path)).forward(ids)
    m = akunu.Model(path, context=256, progress=False)
    logits, taps = m.eval(ids, all_logits=True, hidden_states=[0, 2, -1])
    assert list(taps) == [0, 2, -1]
    for layer, got in taps.items():
        assert_close(got, want[layer], f"layer {layer}")
    assert_close(logits, want_logits, "logits")


def test_taps_across_chunks_beside_logits_and_keyed_as_given():
    """A prompt over several 7-token chunks, after tokens already in the cache: the same taps as
    one chunk; logits, KV cache and sampled token exactly as without taps; keys as given
    (repeats and negative indices included)."""
    path = require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf")
    ids = prompt_ids("tiny-gemma3-random", 1)
    head, ids = ids[:3], ids[3:]
    whole = akunu.Model(path, context=128, progress=False)
    chunked = akunu.Model(path, context=128, prefill_chunk=7, progress=False)
    assert len(ids) > 3 * chunked.prefill_chunk
    for m in (whole, chunked):
        m.eval(head, reset=False)
    _, want = whole.eval(ids, hidden_states=[1, 4], reset=False)
    plain = chunked.fork()
    want_logits = plain.eval(ids, all_logits=True, reset=False)
    logits, got = chunked.eval(ids, all_logits=True, hidden_states=[4, -5, 1, -1], reset=False)
    assert list(got) == [4, -5, 1, -1]
    np.testing.assert_array_equal(got[-5], got[1])
    scale = np.abs(want[4]).max()
    np.testing.assert_allclose(got[4], want[4], atol=1e-4 * scale)
    np.testing.assert_allclose(got[1], want[1], atol=1e-4 * np.abs(want[1]).max())
    np.testing.assert_array_equal(logits, want_logits)
    assert chunked.kv_cache.current_length == plain.kv_cache.current_length == len(head) + len(ids)
    np.testing.assert_array_equal(chunked.kv_cache.k(5), plain.kv_cache.k(5))
    assert chunked._engine.sampled_token() == plain._engine.sampled_token()
    # The last-row path (no all-position logits) gives the last logits as a view, as eval does.
    for m in (chunked, plain):
        m.kv_cache.truncate(len(head))
    want_last = plain.eval(ids, reset=False).copy()
    last, again = chunked.eval(ids, hidden_states=[1], reset=False)
    np.testing.assert_array_equal(last, want_last)
    np.testing.assert_array_equal(again[1], got[1])


def test_taps_leave_the_default_tables_and_allocate_once():
    m = akunu.Model(require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-f16.gguf"), context=64, progress=False)
    table = m.dispatch_table()
    assert not any(c["label"].endswith("tap") for c in table)
    plain = m.eval([1, 2, 3, 4]).copy()
    m.reset()
    logits, taps = m.eval([1, 2, 3, 4], hidden_states=[0])
    np.testing.assert_array_equal(logits, plain)
    allocations = m.memory_report()["device_allocations"]
    for _ in range(2):
        m.reset()
        m.eval([5, 6], hidden_states=[0], reset=False)
        m.eval([7], hidden_states=[0], reset=False)  # a single token runs the tapped prefill table too
    assert m.memory_report()["device_allocations"] == allocations
    assert m.dispatch_table() == table
    m.reset()
    np.testing.assert_array_equal(m.eval([1, 2, 3, 4]), plain)


def test_tapped_tables_are_bounded():
    """Every distinct layer set used to keep its table and buffers forever (126 sets grew the
    device allocation fivefold): the 8 most recently used are kept, and results do not change."""
    m = akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"), context=64, progress=False)
    sets = [[a, b] for a in (0, 1, -1, -2) for b in (0, 1, -1, -2)]  # 16 sets, equal in size
    first, allocated = {}, []
    for _ in range(2):
        for n, layers in enumerate(sets, 1):
            m.reset()
            _, hidden = m.eval([1, 2, 3], hidden_states=layers)
            first.setdefault(tuple(layers), hidden)
            for k in layers:
                np.testing.assert_array_equal(hidden[k], first[tuple(layers)][k])
            if n >= 8:
                allocated.append(m.memory_report()["device_allocated"])
    assert len(set(allocated)) == 1  # from the 8th set on, a new table replaces an old one


def test_a_layer_the_model_lacks_is_refused():
    m = akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"), context=64, progress=False)
    m.eval([1, 2])
    for layer in (2, -3):
        with pytest.raises(akunu.Error,
                           match=rf"hidden state of layer {layer}: the model has 2 layers \(0 to 1, or -1 to -2"):
            m.eval([3, 4], hidden_states=[0, layer], reset=False)
    assert m.kv_cache.current_length == 2
    assert FIXTURES.exists()
