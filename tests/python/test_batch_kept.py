"""The Model keeps the batch a score_batch call ran in, and the one a generate_batch or
stream_batch call ran in (akunu.batch.KeptBatches): a later call of that kind that fits it (as
many sequences at once or fewer, the same rows a step, blocks enough) runs in it, and gives what
a new batch gives, to the bit: a sequence's rows meet the same products whichever pool blocks
hold its cache, a freed block takes its prefix hash with it, and an emptied batch lays out its
steps' rows as a new one does. A call that does not fit makes
a new batch and keeps that one instead; a stream left unfinished drops its batch.
memory_report()["kept_batches"] counts the kept batches' bytes and release_batches() frees
them; two threads scoring at once each run their own batch; a fork keeps its own."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from akunu import Sampler
from test_batch import load, prompts

pytestmark = pytest.mark.usefixtures("backend")


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def kept(m, prefix_sharing):
    entry = m._kept_batches._kept.get(prefix_sharing)
    return entry[0] if entry else None


def test_a_kept_scoring_batch_scores_as_a_new_one_until_released():
    m = load(context=300)
    seqs = prompts(5, m.config.vocab_size, seed=7, lo=2, hi=60)
    assert m.memory_report()["kept_batches"] == 0
    first = m.score_batch(seqs, max_sequences=3)
    b = kept(m, False)
    assert b is not None and m.memory_report()["kept_batches"] > 0
    assert_same(m.score_batch(seqs, max_sequences=3), first)
    assert kept(m, False) is b
    # Fewer at once, and shorter lists, run in the kept batch too.
    fewer = m.score_batch(seqs[:2], max_sequences=2, greedy=True)
    assert kept(m, False) is b
    fresh = load(context=300).score_batch(seqs[:2], max_sequences=2, greedy=True)
    for (lp, flags), (want_lp, want_flags) in zip(fewer, fresh):
        np.testing.assert_array_equal(lp, want_lp)
        np.testing.assert_array_equal(flags, want_flags)
    # More at once, or other rows a step, do not fit: a new batch runs the call and is kept instead.
    assert_same(m.score_batch(seqs, max_sequences=5), load(context=300).score_batch(seqs, max_sequences=5))
    assert kept(m, False) is not b and kept(m, False).max_sequences == 5
    b = kept(m, False)
    m.score_batch(seqs, max_sequences=5, rows=64)
    assert kept(m, False) is not b and kept(m, False).rows == 64
    m.release_batches()
    assert m.memory_report()["kept_batches"] == 0 and kept(m, False) is None
    assert_same(m.score_batch(seqs, max_sequences=3), first)


def test_a_kept_generation_batch_generates_as_a_new_one():
    m = load(context=300)
    vocab = m.config.vocab_size
    shared = prompts(1, vocab, seed=3, lo=270, hi=271)[0]
    # Prompts that share a whole block: their hashes must not outlive the call that wrote them.
    ps = [shared[:260] + p for p in prompts(3, vocab, seed=4, lo=1, hi=8)] + prompts(2, vocab, seed=5, lo=2, hi=30)
    samplers = [Sampler(temperature=0.8, seed=i) for i in range(len(ps))]
    want = load(context=300).generate_batch(ps, max_tokens=6, sampler=samplers, max_sequences=3)
    for _ in range(2):
        got = m.generate_batch(ps, max_tokens=6, sampler=samplers, max_sequences=3)
        assert [g.token_ids for g in got] == [g.token_ids for g in want]
        assert_same([np.asarray(g.logprobs) for g in got], [np.asarray(g.logprobs) for g in want])
    b = kept(m, True)
    assert b is not None and kept(m, False) is None
    # A stream left unfinished drops its batch; the next call makes a new one.
    stream = m.stream_batch(ps, max_tokens=6, sampler=samplers, max_sequences=3)
    next(stream)
    stream.close()
    assert kept(m, True) is None
    got = m.generate_batch(ps, max_tokens=6, sampler=samplers, max_sequences=3)
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    assert kept(m, True) is not None and kept(m, True) is not b


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
    assert kept(m, False) is not None


def test_a_fork_keeps_its_own_batch():
    m = load(context=300)
    seqs = prompts(3, m.config.vocab_size, seed=11, lo=2, hi=30)
    want = m.score_batch(seqs)
    b = kept(m, False)
    f = m.fork()
    assert f.memory_report()["kept_batches"] == 0
    assert_same(f.score_batch(seqs), want)
    assert kept(f, False) is not b and kept(m, False) is b


def test_a_kept_batch_plans_its_steps_as_a_new_one():
    """A step's rows come from the sequences in turn from a place that moves each step; an
    emptied batch starts that turn again, so the call after one of any number of steps lays out
    its rows, and so sums its attention, as a new batch does."""
    m = load(context=300)
    vocab = m.config.vocab_size
    seqs = prompts(5, vocab, seed=21, lo=2, hi=50)
    want = load(context=300).score_batch(seqs, rows=16)
    for seed in (13, 14, 15):  # calls of 5 lists and several steps each: the turn moves
        m.score_batch(prompts(5, vocab, seed=seed, lo=2, hi=50), rows=16)
        b = kept(m, False)
        assert_same(m.score_batch(seqs, rows=16), want)
        assert kept(m, False) is b


@pytest.mark.parametrize("chunk", [0, 200])
def test_a_scoring_batch_takes_twice_the_chunk_on_gpus(chunk):
    """score_batch's default rows a step: on a GPU twice the prefill chunk as asked for (a
    step reads every weight once, and scoring has no decode rows waiting), elsewhere (a CPU
    device: lavapipe, the CPU backend) a Batch's default; explicit rows are taken as given. The
    scores equal those of a batch of the default rows within the GEMM order's tolerance."""
    from akunu import Batch, _akunu
    from test_batch import LOGIT_TOL

    m = load(context=300, prefill_chunk=chunk)
    seqs = prompts(4, m.config.vocab_size, seed=9, lo=40, hi=90)
    got = m.score_batch(seqs, max_sequences=4)
    default = Batch(m, max_sequences=4).rows
    if m.device.profile["type"] == "cpu":
        assert _akunu.BatchEngine.scoring_rows(m._engine) == 0
        assert kept(m, False).rows == default
    else:
        want = min(2 * max(chunk or 512, 128), 4096)
        assert _akunu.BatchEngine.scoring_rows(m._engine) == want
        assert kept(m, False).rows == Batch(m, max_sequences=4, rows=want).rows
    for g, w in zip(got, m.score_batch(seqs, max_sequences=4, rows=default)):
        np.testing.assert_allclose(g, w, atol=LOGIT_TOL * 10)


def test_a_scoring_batch_falls_back_to_the_default_rows_where_the_preferred_do_not_fit(monkeypatch):
    """Twice the chunk is a speed preference: where a batch of the preferred rows cannot be made
    (the device's memory), score_batch runs in a Batch's default rows and scores alike, and the
    model's later calls do not try again until release_batches(). Forced here by a preferred 64
    rows whose batch fails to allocate."""
    from akunu import _akunu
    from akunu import batch as batch_module
    from test_batch import LOGIT_TOL

    m = load(context=300)
    seqs = prompts(3, m.config.vocab_size, seed=21, lo=30, hi=80)
    want = m.score_batch(seqs, max_sequences=3)
    default_rows = kept(m, False).rows
    m.release_batches()
    monkeypatch.setattr(batch_module, "_scoring_rows", lambda model: 64)
    m.score_batch(seqs, max_sequences=3)
    assert kept(m, False).rows == 64  # the preferred rows, where they fit
    m.release_batches()
    take, tried = batch_module.KeptBatches.take, []

    def failing_take(self, model, held, rows, blocks, prefix_sharing):
        tried.append(rows)
        if rows == 64:
            raise _akunu.Error("vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY")
        return take(self, model, held, rows, blocks, prefix_sharing)

    monkeypatch.setattr(batch_module.KeptBatches, "take", failing_take)
    got = m.score_batch(seqs, max_sequences=3)
    assert kept(m, False).rows == default_rows and tried == [64, 0]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=LOGIT_TOL * 10)
    m.score_batch(seqs, max_sequences=3)
    assert tried == [64, 0, 0]  # the failure is remembered: the kept default batch runs the call
    m.release_batches()
    m.score_batch(seqs, max_sequences=3)
    assert tried == [64, 0, 0, 64, 0]
