"""akunu.batch_scoring: continuations scored after a shared context that runs once (each
continuation a fork of it), on each backend, against Model.score of the whole sequence (within
the batch's tolerance) and the argmax of its rows, for groups of choices, lone requests,
one-token continuations and a batch of two sequences (the tightest schedule: one context, one
fork at a time)."""
from __future__ import annotations

import numpy as np
import pytest

from akunu.batch_scoring import score_continuations
from test_batch import LOGIT_TOL, load, prompts

pytestmark = pytest.mark.usefixtures("backend")


@pytest.mark.parametrize("max_sequences", [2, 5])
def test_continuations_after_a_shared_context_are_score(max_sequences):
    m = load(context=300)
    vocab = m.config.vocab_size
    contexts = prompts(3, vocab, seed=41, lo=1, hi=280)
    conts = prompts(9, vocab, seed=42, lo=1, hi=9)
    requests = [(contexts[i % 3], conts[i]) for i in range(9)] + [(contexts[0][:7], [5])]
    got = score_continuations(m, requests, max_sequences=max_sequences)
    for (ctx, cont), (lp, greedy) in zip(requests, got):
        ids = ctx + cont
        want = m.score(ids)[len(ctx) - 1:]
        assert lp.shape == greedy.shape == (len(cont),)
        np.testing.assert_allclose(lp, want, atol=LOGIT_TOL * 10)
        rows = m.eval(ids[:-1], all_logits=True)[len(ctx) - 1:]
        np.testing.assert_array_equal(greedy, rows.argmax(axis=1) == np.asarray(cont))


def test_bad_requests_are_refused():
    m = load(context=50)
    with pytest.raises(ValueError, match="request 1 has 0 context"):
        score_continuations(m, [([1, 2], [3]), ([], [4])])
    with pytest.raises(ValueError, match="request 0 has 45 context and 7 continuation"):
        score_continuations(m, [(list(range(3, 48)), list(range(3, 10)))])
