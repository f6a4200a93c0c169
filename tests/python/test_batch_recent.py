"""akunu.Batch over a KV format with a recent window ("int4h+w8", "q8/int4+w16"): each sequence
has its own f16 rings, which a fork copies and a sequence that adopts shared prefix blocks
starts from the blocks' kept tails.

Batch matches solo as test_batch.py states it (greedy tokens equal, logits within LOGIT_TOL of
their scale): the batch computes what a single sequence with the same kv_dtype does, including
its window. A batch whose window read the wrong rows (another sequence's, a stale ring, an
empty one) moves the logits of the latest keys' queries far past that tolerance, which the
fork and prefix tests check against a tighter bound where both sides are batch rows.
"""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from test_batch import LOGIT_TOL, load, prompts, run_staggered, solo

pytestmark = pytest.mark.usefixtures("backend")

FORMATS = ["int4h+w8", "q8/int4+w16"]
SAME_ROWS_TOL = 1e-4  # of max |logit|: two batch rows of one state, in one step


def same_rows_tol(m) -> float:
    """SAME_ROWS_TOL where a row's products do not depend on the step it runs in (CPU-type
    devices: lavapipe and the CPU backend sum each row alike in every GEMM). A GPU runs steps
    of different rows through different GEMM kernels (short tiles, cooperative matrices, f16
    activations), so two runs that cut the same rows into other steps differ by the batch's
    own LOGIT_TOL."""
    return SAME_ROWS_TOL if m.device.profile["type"] == "cpu" else LOGIT_TOL


def greedy_margins(m, ids, n):
    """The solo run's greedy tokens (as solo() picks them) and each pick's lead over the
    runner-up, as a share of max |logit|."""
    tokens, margins = [], []
    logits = m.eval(ids).copy()
    for _ in range(n):
        top = np.sort(logits)[-2:]
        tokens.append(int(np.argmax(logits)))
        margins.append(float(top[1] - top[0]) / float(np.abs(logits).max()))
        logits = m.eval([tokens[-1]], reset=False).copy()
    return tokens, margins


@pytest.mark.parametrize("kv_dtype", FORMATS)
@pytest.mark.parametrize("size", [1, 3, 7])
def test_batch_with_a_recent_window_equals_solo(kv_dtype, size):
    """Sequences join and leave mid-run; 16 rows a step cut the prompts (up to 300 tokens, past
    one block) into pieces, so queries read their window from the step's rows and the rings."""
    m = load(kv_dtype=kv_dtype)
    all_ids = prompts(size, m.config.vocab_size, seed=30 + size, lo=5, hi=300)
    max_tokens = [3 + (i * 5) % 7 for i in range(size)]
    want = [solo(m, ids, n) for ids, n in zip(all_ids, max_tokens)]
    b = akunu.Batch(m, max_sequences=max(1, size // 2 + 1), rows=16)
    got = run_staggered(b, all_ids, max_tokens)
    # A solo run stops at the end-of-sequence token, a batch's sequence where it is told. The
    # tokens agree up to a pick whose lead over the runner-up is within LOGIT_TOL (a GPU's GEMMs
    # round the batch's rows otherwise than the solo GEMVs), and all of them on CPU-type devices.
    for g, w, ids in zip(got, want, all_ids):
        tokens, margins = greedy_margins(m, ids, len(w))
        close = next((i for i, (t, lead) in enumerate(zip(tokens, margins)) if lead <= LOGIT_TOL or t != w[i]),
                     len(w))
        assert g[:close] == w[:close], f"agreed picks up to {close} of {len(w)}"
        if m.device.profile["type"] == "cpu":  # there the batch's rows round as solo's: every pick
            assert g[:len(w)] == w
    assert sum(map(len, want)) > sum(max_tokens) // 2
    assert b.memory_report()["blocks_used"] == 0


@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_batch_logits_with_a_recent_window_match_solo(kv_dtype):
    """A 40-token prompt in pieces of 16 rows beside another sequence, then decode steps: each
    step's logits against the windowed solo run, and nearer it than the format without its
    window (so the window is what the batch computes)."""
    m = load(kv_dtype=kv_dtype)
    plain = load(kv_dtype=kv_dtype.partition("+")[0])
    ids = prompts(1, m.config.vocab_size, seed=40, lo=40, hi=41)[0]
    b = akunu.Batch(m, max_sequences=2, rows=16)
    b.add(prompts(1, m.config.vocab_size, seed=41, lo=30, hi=31)[0])
    seq = b.add(ids)
    near, far = [], []
    for step in range(4):
        out = {}
        while seq not in out:
            out = {s: t for s, t, _ in b.step()}
        got = b.logits(seq)
        want = (m.eval(ids) if step == 0 else m.eval([ids[-1]], reset=False)).copy()
        other = (plain.eval(ids) if step == 0 else plain.eval([ids[-1]], reset=False)).copy()
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= LOGIT_TOL * scale
        assert out[seq] == int(np.argmax(want))
        near.append(np.abs(got - want).mean())
        far.append(np.abs(got - other).mean())
        ids = ids + [out[seq]]
    assert np.mean(near) < np.mean(far)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_fork_copies_the_rings(kv_dtype, split, backend):
    """The fork lands in a slot whose rings another sequence used: without its source's rings
    its window would read that sequence's rows. Greedy, both then compute the same. Split over
    two devices of the backend, each part copies its layers' rings."""
    m = load(kv_dtype=kv_dtype, **({"devices": [backend, backend]} if split else {}))
    b = akunu.Batch(m, max_sequences=3, rows=16)
    ids = prompts(2, m.config.vocab_size, seed=50, lo=25, hi=60)
    a = b.add(ids[0])
    gone = b.add(ids[1])
    for _ in range(10):  # both prompts run (16 rows a step), then a few decode steps
        b.step()
    b.remove(gone)
    c = b.fork(a)
    assert c == gone
    for _ in range(3):
        out = {s: t for s, t, _ in b.step()}
        assert out[a] == out[c]
        la, lc = b.logits(a), b.logits(c)
        assert np.abs(la - lc).max() <= SAME_ROWS_TOL * np.abs(la).max()


@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_prefix_sharing_restores_the_window(kv_dtype, backend):
    """Sequences after a common prompt of more than one block adopt its first block, whose
    last positions their windows read: with sharing, the same tokens and logits as without."""
    m = load(kv_dtype=kv_dtype)
    prefix = prompts(1, m.config.vocab_size, seed=60, lo=300, hi=301)[0]
    tails = prompts(4, m.config.vocab_size, seed=61, lo=1, hi=4)
    results = {}
    for sharing in (False, True):
        b = akunu.Batch(m, max_sequences=4, rows=64, prefix_sharing=sharing)
        first = b.add(prefix + tails[0])
        while not b.step():
            pass
        seqs = [first] + [b.add(prefix + t) for t in tails[1:]]
        toks = {s: [] for s in seqs}
        logits = {s: [] for s in seqs}
        while min(len(t) for t in toks.values()) < 3:
            for s, t, _ in b.step():
                toks[s].append(t)
                logits[s].append(b.logits(s).copy())
        if sharing:
            assert b.memory_report()["blocks_shared"] == 1
            assert all(b.block_table(s)[0] == b.block_table(first)[0] for s in seqs)
            assert b.memory_report()["recent_bytes"] > 0
        results[sharing] = ([toks[s][:3] for s in seqs], [logits[s] for s in seqs])
    tol = same_rows_tol(m)
    for got, want, want_logits in zip(results[True][0], results[False][0], results[False][1]):
        # Greedy picks agree up to the first whose lead over the runner-up either run's logits
        # may cross (within tol of max |logit| each): every pick on CPU-type devices.
        for g, w, row in zip(got, want, want_logits):
            top = np.sort(row)[-2:]
            if top[1] - top[0] <= 2 * tol * np.abs(row).max():
                break
            assert g == w
    for got, want in zip(results[True][1][1:], results[False][1][1:]):
        assert np.abs(got[0] - want[0]).max() <= tol * np.abs(want[0]).max()


@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_score_batch_with_a_recent_window_equals_score(kv_dtype):
    m = load(kv_dtype=kv_dtype)
    seqs = prompts(4, m.config.vocab_size, seed=70, lo=2, hi=120)
    for ids, got in zip(seqs, m.score_batch(seqs, max_sequences=3, rows=32)):
        np.testing.assert_allclose(got, m.score(ids), atol=LOGIT_TOL * 10)
