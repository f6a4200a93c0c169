"""score_batch keeps its Batch on the Model between calls (akunu.batch.KeptBatch): a call that
fits the kept batch (as many sequences at once or fewer, the same rows a step, blocks enough)
runs in it, and scores as a new batch does, to the bit: a sequence's rows meet the same
products whichever pool blocks hold its cache. A call that does not fit makes a new batch and
keeps that one instead. memory_report()["kept_batch"] counts the kept batch's bytes and
release_batches() frees it; two threads scoring at once each run their own batch; a fork keeps
its own."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from test_batch import load, prompts

pytestmark = pytest.mark.usefixtures("backend")


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_kept_batch_scores_as_a_new_one_until_released():
    m = load(context=300)
    seqs = prompts(5, m.config.vocab_size, seed=7, lo=2, hi=60)
    assert m.memory_report()["kept_batch"] == 0
    first = m.score_batch(seqs, max_sequences=3)
    kept = m._kept_batch._batch
    assert kept is not None and m.memory_report()["kept_batch"] > 0
    assert_same(m.score_batch(seqs, max_sequences=3), first)
    assert m._kept_batch._batch is kept
    # Fewer at once, and shorter lists, run in the kept batch too.
    fewer = m.score_batch(seqs[:2], max_sequences=2, greedy=True)
    assert m._kept_batch._batch is kept
    fresh = load(context=300).score_batch(seqs[:2], max_sequences=2, greedy=True)
    for (lp, flags), (want_lp, want_flags) in zip(fewer, fresh):
        np.testing.assert_array_equal(lp, want_lp)
        np.testing.assert_array_equal(flags, want_flags)
    # More at once does not fit: a new batch runs the call and is kept instead.
    assert_same(m.score_batch(seqs, max_sequences=5), load(context=300).score_batch(seqs, max_sequences=5))
    assert m._kept_batch._batch is not kept and m._kept_batch._batch.max_sequences == 5
    m.release_batches()
    assert m.memory_report()["kept_batch"] == 0 and m._kept_batch._batch is None
    assert_same(m.score_batch(seqs, max_sequences=3), first)


def test_two_threads_scoring_at_once_each_run_their_own_batch():
    m = load(context=300)
    seqs = prompts(4, m.config.vocab_size, seed=9, lo=2, hi=40)
    want = m.score_batch(seqs, max_sequences=2)
    results, errors = [None, None], []

    def run(i):
        try:
            for _ in range(3):
                results[i] = m.score_batch(seqs, max_sequences=2)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert_same(r, want)
    assert m._kept_batch._batch is not None


def test_a_fork_keeps_its_own_batch():
    m = load(context=300)
    seqs = prompts(3, m.config.vocab_size, seed=11, lo=2, hi=30)
    want = m.score_batch(seqs)
    kept = m._kept_batch._batch
    f = m.fork()
    assert f.memory_report()["kept_batch"] == 0
    assert_same(f.score_batch(seqs), want)
    assert f._kept_batch._batch is not kept and m._kept_batch._batch is kept
