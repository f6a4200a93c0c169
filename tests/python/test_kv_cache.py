"""akunu.KVCache: a batch's KV cache as arrays [batch, positions, kv_heads, head_dim], on each
backend. Reading: every slot's rows equal the batch's per-sequence view, zeros past its length.
Writing is real: the rows of a solo prefill written with update() and counted with advance()
let the batch continue the sequence from them with the solo model's greedy tokens (and logits
within the batch's LOGIT_TOL), while other rows change what it samples; memory_usage follows
the blocks; bad input raises and changes nothing."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require
from test_batch import LOGIT_TOL, load, prompts

pytestmark = pytest.mark.usefixtures("backend")


def solo_rows(m, ids):
    """The solo model's K and V rows of ids, per layer: [len, n_kv_heads, head_dim] f16."""
    m.eval(ids)
    return [(m.kv_cache.k(layer).transpose(1, 0, 2).copy(), m.kv_cache.v(layer).transpose(1, 0, 2).copy())
            for layer in range(m.config.n_layers)]


def test_k_and_v_have_a_batch_dimension():
    m = load()
    b = akunu.Batch(m, max_sequences=3)
    all_ids = prompts(2, m.config.vocab_size, seed=31, lo=5, hi=40)
    seqs = [b.add(ids) for ids in all_ids]
    sampled: set[int] = set()
    while len(sampled) < 2:
        sampled |= {seq for seq, _, _ in b.step()}
    cache = b.kv
    lengths = cache.lengths()
    assert lengths == [b.length(seqs[0]), b.length(seqs[1]), 0]
    for layer in (0, m.config.n_layers - 1):
        k, v = cache.k(layer), cache.v(layer)
        assert k.shape == v.shape == (3, max(lengths), m.config.n_kv_heads, m.config.head_dim)
        assert k.dtype == np.float16
        for seq, n in zip(seqs, lengths):
            np.testing.assert_array_equal(k[seq, :n], b.kv_cache(seq).k(layer).transpose(1, 0, 2))
            np.testing.assert_array_equal(v[seq, :n], b.kv_cache(seq).v(layer).transpose(1, 0, 2))
            assert not k[seq, n:].any()
        assert not k[2].any()


def test_rows_written_with_update_are_what_the_batch_attends_to():
    m = load()
    ids = prompts(1, m.config.vocab_size, seed=32, lo=30, hi=31)[0]
    want = m.generate(ids, max_tokens=6, stream=False).token_ids
    want_logits = m.eval(ids).copy()
    rows = solo_rows(m, ids[:-1])
    other = solo_rows(m, prompts(1, m.config.vocab_size, seed=33, lo=29, hi=30)[0])
    cache = akunu.KVCache(m, batch=2)
    assert cache.lengths() == [0, 0]
    for seq, source in ((0, rows), (1, other)):
        for layer, (k, v) in enumerate(source):
            k_all, v_all = cache.update(seq, layer, k[:10], v[:10])  # in two pieces: update appends
            cache.update(seq, layer, k[:10], v[:10])  # written again at the same place: not yet advanced
            assert k_all.shape == (10, m.config.n_kv_heads, m.config.head_dim)
        cache.advance(seq, 10)
        for layer, (k, v) in enumerate(source):
            k_all, v_all = cache.update(seq, layer, k[10:], v[10:])
            np.testing.assert_array_equal(k_all, k)
            np.testing.assert_array_equal(v_all, v)
        cache.advance(seq, len(ids) - 11)
        cache.batch.extend(seq, ids[-1:])
    assert cache.lengths() == [len(ids) - 1] * 2
    np.testing.assert_array_equal(cache.k(1)[0], rows[1][0])
    got = {0: [], 1: []}
    first = True
    while len(got[0]) < 6:
        for seq, token, _ in cache.batch.step():
            got[seq].append(token)
        if first:
            logits = cache.batch.logits(0)
            assert np.abs(logits - want_logits).max() <= LOGIT_TOL * np.abs(want_logits).max()
            first = False
    assert got[0] == want
    assert got[1] != want  # the other prompt's rows: another continuation


def test_memory_usage_follows_the_blocks():
    m = load()
    cache = akunu.KVCache(m, batch=2)
    use = cache.memory_usage()
    assert use["used"] == 0 and use["per_sequence"] == [0, 0] and use["total"] >= 2 * use["block"] > 0
    rows = np.zeros((300, m.config.n_kv_heads, m.config.head_dim), np.float16)
    cache.update(1, 0, rows, rows)
    cache.advance(1, 300)
    use = cache.memory_usage()
    assert use["per_sequence"] == [0, 2 * use["block"]] and use["used"] == 2 * use["block"]
    assert "KVCache(batch=2" in repr(cache) and "lengths=[0, 300]" in repr(cache)


def test_bad_input_raises_and_changes_nothing():
    m = load()
    cache = akunu.KVCache(m, batch=1)
    h, d = m.config.n_kv_heads, m.config.head_dim
    good = np.ones((2, h, d), np.float16)
    with pytest.raises(ValueError, match="expected \\[n, "):
        cache.update(0, 0, np.ones((2, h + 1, d)), good)
    with pytest.raises(ValueError, match="k has 2 rows and v 3"):
        cache.update(0, 0, good, np.ones((3, h, d)))
    with pytest.raises(IndexError, match="layer 99 is out of range"):
        cache.k(99)
    with pytest.raises(akunu.Error, match="not in the batch"):
        cache.update(5, 0, good, good)
    with pytest.raises(akunu.Error, match="context"):
        cache.advance(0, m.context + 1)
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        cache.advance(0, -1)
    with pytest.raises(ValueError, match="KVCache.advance: n must be an integer in"):
        cache.advance(0, 2**40)  # past a C int: not pybind11's list of signatures
    nan, big = good.copy(), good.astype(np.float32)
    nan[1, 0, 3] = np.nan
    big[0, 1, 0] = 1e6  # past f16's range: infinity
    with pytest.raises(ValueError, match="k row 1 is not finite"):
        cache.update(0, 0, nan, good)
    with pytest.raises(ValueError, match="v row 0 is not finite"):
        cache.update(0, 0, good, big)
    assert cache.lengths() == [0]
    q8 = akunu.KVCache(akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"),
                                   context=300, kv_dtype="q8", progress=False))
    with pytest.raises(akunu.Error, match="f16 cache only; this one is q8"):
        q8.update(0, 0, good, good)
    assert q8.k(0).shape == (1, 0, h, d) and q8.k(0).dtype == np.float32
