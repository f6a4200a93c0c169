"""whisper_pick, the pick of a greedy chain (akunu.whisper.chain), against rules.py's LogitRules
and a float64 log-softmax, on a made-up vocabulary of odd size, on both backends: every branch
of the timestamp grammar, a forced timestamp, suppressed and begin-suppressed ids, non-finite
logits, ties, nothing left to pick, and the slot's next state."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

import akunu
from akunu import ops
from akunu.whisper import rules
from akunu.whisper.rules import LogitRules, log_softmax

pytestmark = pytest.mark.usefixtures("backend")

VOCAB, EOT, NO_TS, TB = 301, 200, 203, 204  # 97 timestamps
NONE = 0xFFFFFFFF
ACTIVE, DONE, TIMESTAMPS = 1, 2, 4
N_CTX = 40
F = {name: i for i, name in enumerate(ops.WHISPER_CHAIN_FIELDS)}


class Ids:
    """The special ids LogitRules reads."""
    eot, no_timestamps, timestamp_begin = EOT, NO_TS, TB


HISTORIES = [[], [17], [TB + 5], [17, TB + 5], [TB + 5, TB + 9], [TB + 3, 17], [TB + 2, 17, TB + 8],
             [TB, 40, 41, TB + 6, TB + 6], [5, 6, 7, 8]]


def cases(rng):
    """(history, timestamps, max_initial, suppress, begin_suppress, max_new, pos, logits row)."""
    out = []
    for i, gen in enumerate(HISTORIES * 4):
        x = rng.standard_normal(VOCAB) * 3
        kind = i // len(HISTORIES)
        if kind == 1:  # each timestamp below the likeliest text token, all of them together above it
            x[TB:] = x[:TB].max() - 1.5 + 0.1 * rng.standard_normal(VOCAB - TB)
        if kind == 2:
            x[rng.integers(0, VOCAB, 5)] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
            x[[11, 12]] = x.max() + 1  # a tie: the lower id wins
        suppress = sorted(set(rng.integers(0, VOCAB, 30).tolist()) - {EOT}) if kind != 3 else []
        begin = [11, EOT] if kind == 2 else [220 % VOCAB]
        out.append((gen, i % 2 == 0, [None, 3, 0][i % 3], suppress, begin, [len(gen) + 1, 99][i % 2],
                    [10, N_CTX - 1][i % 5 == 4], x.astype(np.float32)))
    # Nothing left: every id suppressed (<|endoftext|> with log-probability 0).
    out.append(([], False, None, list(range(VOCAB)), [], 5, 3, rng.standard_normal(VOCAB).astype(np.float32)))
    return out


def state_of(gen, timestamps, max_initial, max_new, pos):
    st = np.zeros(len(F), np.uint32)
    stamps = [g for g in gen if g >= TB]
    st[F["token"]], st[F["pos"]], st[F["generated"]], st[F["max_new"]] = 7, pos, len(gen), max_new
    st[F["last"]] = gen[-1] if gen else 0
    st[F["before_last"]] = gen[-2] if len(gen) >= 2 else 0
    st[F["last_stamp"]] = stamps[-1] if stamps else NONE
    st[F["flags"]] = ACTIVE | (TIMESTAMPS if timestamps else 0)
    st[F["max_initial"]] = NONE if max_initial is None else max_initial
    return st


def bits(ids, words):
    m = np.zeros(words, np.uint32)
    for i in ids:
        m[i // 32] |= np.uint32(1 << (i % 32))
    return m


def buffers(backend, rows, rng, steps):
    """The pick's buffers for `rows` (cases()), row r picking for slot order[r]: (buffers, the
    slots' states, order)."""
    dev = akunu.Device(backend)
    n, words = len(rows), (VOCAB + 31) // 32
    logits = np.stack([r[-1] for r in rows])
    state = np.stack([state_of(g, ts, mi, mn, pos) for g, ts, mi, _, _, mn, pos, _ in rows])
    masks = np.stack([[bits(s, words), bits(b, words)] for _, _, _, s, b, _, _, _ in rows])
    order = rng.permutation(n).astype(np.uint32)
    bufs = dict(logits=dev.upload(logits[order]), row_slot=dev.upload(order), masks=dev.upload(masks),
                state=dev.upload(state), tokens=dev.upload(np.full((n, steps), 0xDEADBEEF, np.uint32)),
                logprobs=dev.upload(np.full((n, steps), np.nan, np.float32)))
    return bufs, state, order


def test_picks_follow_the_rules(backend, rng):
    rows = cases(rng)
    n, steps, step = len(rows), 3, 1
    bufs, state, order = buffers(backend, rows, rng, steps)
    ops.whisper_pick(**bufs, eot=EOT, timestamp_begin=TB, no_timestamps=NO_TS, no_speech=3, n_ctx=N_CTX, step=step,
                     n_tokens=n - 1)
    tokens, logprobs, after = bufs["tokens"].numpy(), bufs["logprobs"].numpy(), bufs["state"].numpy()
    skipped = int(order[n - 1])  # past n_tokens: untouched
    assert (tokens[skipped] == 0xDEADBEEF).all() and (after[skipped] == state[skipped]).all()
    forced = 0
    for s, (gen, ts, mi, sup, beg, max_new, pos, x) in enumerate(rows):
        if s == skipped:
            continue
        ruled = LogitRules(Ids, sup, beg, ts, mi).apply(x, gen)
        want = int(np.argmax(ruled))
        with mock.patch.object(rules, "logsumexp", lambda v: np.full(1, -np.inf)):  # no forced timestamp
            forced += int(np.argmax(LogitRules(Ids, sup, beg, ts, mi).apply(x, gen))) != want
        assert tokens[s, step] == want, f"slot {s}: history {gen}, timestamps {ts}, max_initial {mi}"
        np.testing.assert_allclose(logprobs[s, step], log_softmax(ruled)[want], atol=2e-5, err_msg=f"slot {s}")
        assert (tokens[s, [0, 2]] == 0xDEADBEEF).all()  # only column `step`
        st = after[s]
        assert st[F["picks"]] == 1 and st[F["pos"]] == pos + 1
        done = want == EOT or len(gen) + 1 >= max_new or pos + 1 >= N_CTX
        assert bool(st[F["flags"]] & DONE) == done, f"slot {s}"
        if want != EOT:
            assert (st[F["token"]], st[F["generated"]], st[F["last"]]) == (want, len(gen) + 1, want)
            assert st[F["before_last"]] == (gen[-1] if gen else 0)
        if not gen:  # the first pick reads p(no_speech) of the raw logits
            raw = np.asarray(x, np.float64)
            p = np.exp(raw[3] - np.log(np.sum(np.exp(raw[np.isfinite(raw)] - raw[np.isfinite(raw)].max())))
                       - raw[np.isfinite(raw)].max())
            if np.isfinite(raw).all():
                np.testing.assert_allclose(st[F["no_speech"]:].view(np.float32)[0], p, rtol=1e-5)
    assert forced >= 2, "no row took the forced-timestamp branch"


def test_top_k_candidates_follow_the_rules(backend, rng):
    """top_k (beam search's candidates): the likeliest ids of LogitRules.apply's row, likeliest
    first, lowest id on ties, with float64 log-softmax log-probabilities; columns past what
    remains read 0xFFFFFFFF and -inf; the state and the other columns are untouched."""
    rows = cases(rng)
    steps, k = 8, 6
    bufs, state, _ = buffers(backend, rows, rng, steps)
    ops.whisper_pick(**bufs, eot=EOT, timestamp_begin=TB, no_timestamps=NO_TS, no_speech=3, n_ctx=N_CTX, top_k=k)
    tokens, logprobs = bufs["tokens"].numpy(), bufs["logprobs"].numpy()
    np.testing.assert_array_equal(bufs["state"].numpy(), state)
    assert (tokens[:, k:] == 0xDEADBEEF).all()
    short = 0
    for s, (gen, ts, mi, sup, beg, _, _, x) in enumerate(rows):
        lp = log_softmax(np.asarray(LogitRules(Ids, sup, beg, ts, mi).apply(x, gen), np.float64))
        finite = np.flatnonzero(np.isfinite(lp))
        want = finite[np.lexsort((finite, -lp[finite]))][:k]  # likeliest first, lower id on ties
        short += len(want) < k
        assert tokens[s, :len(want)].tolist() == want.tolist(), f"slot {s}: history {gen}, timestamps {ts}"
        np.testing.assert_allclose(logprobs[s, :len(want)], lp[want], atol=2e-5, err_msg=f"slot {s}")
        assert (tokens[s, len(want):k] == NONE).all() and np.isneginf(logprobs[s, len(want):k]).all()
    assert short >= 1, "no row ran out of candidates"
    with pytest.raises(akunu.Error, match="top_k 9 must be at most 16 and at most the outputs' row of 8"):
        ops.whisper_pick(**bufs, eot=EOT, timestamp_begin=TB, no_timestamps=NO_TS, top_k=9)
