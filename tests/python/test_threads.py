"""Threads and interleaving: separate Models and forks run in parallel and each gets the text it
would get alone; one Model used from two threads, or by two interleaved generate() streams,
raises a clear error instead of mixing their caches (engine/model_use.h)."""
from __future__ import annotations

import threading

import pytest

import akunu
from support.fixture_paths import require, requires_fixtures

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]
PROMPTS = [[1, 450, 1996], [1, 13, 871, 310], [1, 222], [1, 1681, 338, 263]]


@pytest.fixture(scope="module")
def model(backend):
    return akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf"), context=128,
                       progress=False)


def _reference(m):
    return {tuple(p): m.generate(p, max_tokens=12, stream=False).token_ids for p in PROMPTS}


def _run_threads(work, n):
    errors = []

    def guarded(i):
        try:
            work(i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("how", ["fork", "separate"])
def test_models_and_forks_in_parallel_threads_are_independent(model, how):
    """Each of two threads drives its own model (a fork, or a second Model on the same file):
    every generation equals the one made alone (on the CPU backend forks shared the thread
    pool's dispatch, and about a third of them came out wrong)."""
    want = _reference(model)
    others = [model.fork() if how == "fork" else akunu.Model(model.path, context=128, progress=False)]
    wrong = []

    def work(i):
        m = [model, *others][i]
        for _ in range(6):
            for p in PROMPTS:
                got = m.generate(p, max_tokens=12, stream=False).token_ids
                if got != want[tuple(p)]:
                    wrong.append((i, p, got))

    assert _run_threads(work, 2) == []
    assert wrong == []


def test_one_model_from_two_threads_raises_and_never_mixes(model):
    """Two threads on one Model: a call that overlaps another thread's raises at once, and every
    generation that completes is the one it would be alone."""
    want = _reference(model)
    wrong, refused = [], []

    def work(i):
        for _ in range(8):
            for p in PROMPTS:
                try:
                    got = model.generate(p, max_tokens=12, stream=False).token_ids
                except akunu.Error as e:
                    assert "in use by another thread" in str(e) or "used by another call" in str(e), str(e)
                    refused.append(e)
                    continue
                if got != want[tuple(p)]:
                    wrong.append((i, p, got))

    assert _run_threads(work, 2) == []
    assert wrong == []


def test_a_call_during_another_threads_use_raises_at_once(model):
    held, release = threading.Event(), threading.Event()

    def hold():
        with model._engine.held():
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(30)
    try:
        for call in (lambda: model.eval([1, 2]), model.reset, lambda: model.generate([1], max_tokens=2, stream=False),
                     model.save_state, model.fork):
            with pytest.raises(akunu.Error, match="this Model is in use by another thread"):
                call()
    finally:
        release.set()
        t.join()
    model.eval([1, 2])  # free again


def test_interleaved_streams_raise_instead_of_sharing_a_cache(model):
    """A paused stream whose model another call used does not continue on that call's cache,
    and closing it leaves that cache alone."""
    want = _reference(model)
    first = iter(model.generate(PROMPTS[0], max_tokens=12))
    next(first)
    second = model.generate(PROMPTS[1], max_tokens=12, stream=False)
    assert second.token_ids == want[tuple(PROMPTS[1])]
    length = model.kv_cache.current_length
    with pytest.raises(akunu.Error, match="used by another call while the stream was paused"):
        next(first)
    assert model.kv_cache.current_length == length
    s = iter(model.generate(PROMPTS[2], max_tokens=12))
    next(s)
    model.eval([5])
    with pytest.raises(akunu.Error, match="cannot continue on that cache"):
        list(s)
    # A stream nobody interrupts still runs to the end.
    assert [p.token_id for p in model.generate(PROMPTS[3], max_tokens=12)] == want[tuple(PROMPTS[3])]
