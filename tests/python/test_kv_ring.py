"""Sliding-window layers in a ring (kv_ring=True) against the full cache and the gemma3 fixture
(layers 0-4 with a 32-token window, layer 5 global): the same logits bit for bit across the
wrap (prefill chunks longer than the window, multi-token appends, decode steps), rewinds across
the wrap that work or say how far one can go, states and forks, memory bounded by the ring,
and rings composed with a global layer in blocks."""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu
from support.fixture_paths import FIXTURES, require

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

GEMMA = ("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf")
WINDOW = 32


def ids_of(n, seed=0):
    return [int(x) for x in np.random.default_rng(seed).integers(3, 2040, size=n)]


def pair(context=300, prefill_chunk=7, chain=4, **kw):
    kw = {"context": context, "prefill_chunk": prefill_chunk, "chain": chain, "progress": False, **kw}
    return akunu.Model(require(*GEMMA), **kw), akunu.Model(require(*GEMMA), kv_ring=True, **kw)


def test_rings_match_the_fixture_and_the_full_cache():
    """The fixture's 130-token prompt in chunks of 7 through rings of 32 + max(7, 2 chains of
    4) = 40 rows (the rings wrap three times), then decode steps."""
    full, ring = pair()
    assert ring.kv_cache.layers == ["ring"] * 5 + ["full"]
    assert ring.memory_report()["kv_ring_rows"] == 40
    prompt = json.loads(require("tiny-gemma3-random", "manifest.json").read_text())["prompts"][3]["ids"]
    ref = np.load(FIXTURES / "tiny-gemma3-random" / "ref" / "logits_p3.npy")
    got = ring.eval(prompt, all_logits=True)
    np.testing.assert_array_equal(got, full.eval(prompt, all_logits=True))
    assert np.abs(got - ref).max() < 0.05
    for t in ids_of(50, seed=1):  # decode steps wrap the rings again
        np.testing.assert_array_equal(ring.eval([t], reset=False), full.eval([t], reset=False))
    assert ring.kv_cache.sliding_from == ring.kv_cache.current_length - 40


@pytest.mark.parametrize("prefill_chunk", [5, 64])
def test_appends_across_the_wrap(prefill_chunk):
    """Appends of odd sizes (1 to 71 tokens: longer than the window, and, for chunks of 64,
    chunks longer than the window) land across the ring's wrap point; all-position logits and
    the last-row path agree with the full cache, and so do the views of the rows kept."""
    full, ring = pair(prefill_chunk=prefill_chunk)
    for k, n in enumerate([3, 71, 1, 29, 40, 13, 66]):
        ids = ids_of(n, seed=10 + k)
        if k % 2:
            np.testing.assert_array_equal(ring.eval(ids, all_logits=True, reset=False),
                                          full.eval(ids, all_logits=True, reset=False))
        else:
            np.testing.assert_array_equal(ring.eval(ids, reset=False), full.eval(ids, reset=False))
    length, first = ring.kv_cache.current_length, ring.kv_cache.sliding_from
    assert length == 223 and first > 0
    for layer in (0, 4, 5):
        k = ring.kv_cache.k(layer)
        assert k.shape == full.kv_cache.k(layer).shape == (2, length, 64)
        kept = slice(first if layer < 5 else 0, length)
        np.testing.assert_array_equal(k[:, kept], full.kv_cache.k(layer)[:, kept])
        np.testing.assert_array_equal(ring.kv_cache.v(layer)[:, kept], full.kv_cache.v(layer)[:, kept])
    assert not ring.kv_cache.k(0)[:, :first].any()  # overwritten rows read as zeros


@pytest.mark.parametrize("kv_dtype", ["q8", "int4", "fp4", "q8/int4", "q8/fp4", "int4h", "int4h+w4"])
def test_quantized_rings(kv_dtype):
    """The ring variants of kv_store and of both attention kernels, in every quantized format."""
    full, ring = pair(prefill_chunk=11, kv_dtype=kv_dtype)
    for k, n in enumerate([50, 37, 1, 1, 64]):
        ids = ids_of(n, seed=20 + k)
        np.testing.assert_array_equal(ring.eval(ids, all_logits=True, reset=False),
                                      full.eval(ids, all_logits=True, reset=False))
    assert ring.kv_cache.sliding_from > 0
    kept = slice(ring.kv_cache.sliding_from, ring.kv_cache.current_length)
    np.testing.assert_array_equal(ring.kv_cache.v_scales(2)[:, kept], full.kv_cache.v_scales(2)[:, kept])
    np.testing.assert_array_equal(ring.kv_cache.k(2, dequantize=True)[:, kept],
                                  full.kv_cache.k(2, dequantize=True)[:, kept])


def test_rewinding_across_the_wrap():
    full, ring = pair()
    prompt = ids_of(100, seed=2)
    ring.eval(prompt)
    full.eval(prompt)
    first = ring.kv_cache.sliding_from
    assert first == 100 - 40
    earliest = first + WINDOW - 1  # the window of the next query must still be in the ring
    with pytest.raises(akunu.Error, match=f"rewind to a length from {earliest} to 100"):
        ring.kv_cache.truncate(earliest - 1)
    assert ring.kv_cache.current_length == 100  # refused: nothing changed
    for m in (ring, full):
        m.kv_cache.truncate(earliest)  # back across the wrap (slot 91 % 40 < slot 99 % 40)
    follow = ids_of(20, seed=3)
    np.testing.assert_array_equal(ring.eval(follow, all_logits=True, reset=False),
                                  full.eval(follow, all_logits=True, reset=False))
    # generate() may take back two pipelined chains: a ring always has room for that.
    before = ring.kv_cache.current_length
    ring.kv_cache.truncate(before - 8)
    ring.kv_cache.truncate(0)
    ring.eval(ids_of(10), reset=False)
    full.reset()
    full.eval(ids_of(10))
    np.testing.assert_array_equal(ring.eval([5], reset=False), full.eval([5], reset=False))


def test_states_and_forks_of_rings():
    full, ring = pair()
    ring.eval(ids_of(90, seed=4))
    full.eval(ids_of(90, seed=4))
    state = ring.save_state()
    assert len(state) < len(full.save_state())  # the rings keep only rows [sliding_from, 90)
    fork = ring.fork()
    assert fork.kv_cache.sliding_from == ring.kv_cache.sliding_from
    other_full = akunu.Model(require(*GEMMA), context=300, prefill_chunk=7, chain=4, progress=False)
    other_full.load_state(state)  # a ring's state into a full cache: its window is all it needs
    full_state_into_ring = akunu.Model(require(*GEMMA), context=300, prefill_chunk=7, chain=4, kv_ring=True,
                                       progress=False)
    full_state_into_ring.load_state(full.save_state())  # the ring keeps the newest rows
    follow = ids_of(30, seed=5)
    want = full.eval(follow, all_logits=True, reset=False)
    for m in (ring, fork, other_full, full_state_into_ring):
        np.testing.assert_array_equal(m.eval(follow, all_logits=True, reset=False), want)
    # A full cache loaded from a ring's state rewinds only as far as the state holds.
    with pytest.raises(akunu.Error, match="rewind to a length from"):
        other_full.kv_cache.truncate(40)


def test_ring_memory_is_bounded_by_the_window():
    short_full, short = pair(context=300)
    long_full, long = pair(context=1200)
    ring_bytes = lambda m, f: f.memory_report()["kv_cache"][1] - m.memory_report()["kv_cache"][1]  # noqa: E731
    # Five sliding layers: the full cache grows with the context, the rings do not.
    per_layer_short = ring_bytes(short, short_full) / 5
    per_layer_long = ring_bytes(long, long_full) / 5
    row = 2 * 2 * 2 * 64  # K and V, 2 heads, head_dim 64, f16
    assert per_layer_short == (300 - 40) * row and per_layer_long == (1200 - 40) * row
    for m in (short, long):
        planned, allocated = m.memory_report()["kv_cache"]
        assert planned == allocated
    plan = akunu.plan(require(*GEMMA), context=1200, prefill_chunk=7, max_chain=4, kv_ring=True, check_device=False)
    assert plan.kv_bytes == long.memory_report()["kv_cache"][1] and plan.kv_ring_rows == 40
    assert plan.kv_full_bytes == long_full.memory_report()["kv_cache"][1]
    assert "5 ring" in str(plan) and "1 full" in str(plan) and "without rings" in str(plan)


def test_rings_compose_with_blocks():
    kw = dict(context=600, prefill_chunk=61, chain=4, progress=False)
    full = akunu.Model(require(*GEMMA), **kw)
    mixed = akunu.Model(require(*GEMMA), kv_ring=True, kv_alloc="blocks", **kw)
    assert mixed.kv_cache.layers == ["ring"] * 5 + ["blocks"]
    prompt = ids_of(300, seed=6)
    np.testing.assert_array_equal(mixed.eval(prompt, all_logits=True), full.eval(prompt, all_logits=True))
    for t in ids_of(5, seed=7):
        np.testing.assert_array_equal(mixed.eval([t], reset=False), full.eval([t], reset=False))
    assert mixed.memory_report()["kv_blocks"] == 2
