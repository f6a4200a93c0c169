"""Scoring continuations that share a context, the context run once (lm-eval's loglikelihood
requests: a multiple-choice question's choices share their question).

    score_continuations(m, [(ctx, cont_a), (ctx, cont_b), (other, cont_c)], max_sequences=8)
    # [(log p of each token of cont | ctx + its earlier tokens, whether each was the argmax)]

Requests are grouped by context. A group's context runs once as a sequence of an akunu.Batch;
once it has run, each continuation is a fork of it (Batch.fork: the context's KV blocks shared,
copy-on-write) whose pending tokens are the continuation's (Batch set_pending with scoring), so
only the continuations' rows run again. The first continuation token is scored from the
context's last row, the others from the fork's rows, the last one from the row that samples.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence

import numpy as np

from akunu.batch import Batch, _pool_blocks
from akunu.controls import log_softmax


def score_continuations(model, requests: Sequence[tuple[Sequence[int], Sequence[int]]],
                        max_sequences: int = 8) -> list[tuple[np.ndarray, np.ndarray]]:
    """(log p of each continuation token, float64 [len(cont)]; whether each was its row's argmax,
    bool) for each (context, continuation) request: a context of at least one id, a non-empty
    continuation, together at most context + 1 ids."""
    groups: dict[tuple[int, ...], list[int]] = collections.defaultdict(list)
    for n, (ctx, cont) in enumerate(requests):
        if not ctx or not cont or len(ctx) + len(cont) > model.context + 1:
            raise ValueError(f"score_continuations: request {n} has {len(ctx)} context and {len(cont)} continuation "
                             f"ids; each needs one or more, together at most the context of {model.context} and one")
        groups[tuple(ctx)].append(n)
    conts = [list(cont) for _, cont in requests]
    out: list = [None] * len(requests)
    _Scheduler(model, max(2, max_sequences), list(groups.items()), conts, out).run()
    return out


class _Scheduler:
    """Contexts join the batch while a sequence slot stays free for forks (a context that has run
    waits for slots to fork its continuations into, so one slot is kept for them)."""

    def __init__(self, model, max_sequences: int, groups: list, conts: list, out: list):
        # Blocks for any max_sequences of the contexts and forks at once: a fork writes at most its
        # context and continuation (its shared blocks counted again: a bound, not a count).
        positions = [len(ctx) for ctx, _ in groups] + [len(ctx) + len(conts[n]) for ctx, ns in groups for n in ns]
        self.batch = Batch(model, max_sequences=max_sequences, blocks=_pool_blocks(positions, max_sequences),
                           prefix_sharing=False)
        self.b = self.batch._b
        self.waiting = collections.deque(groups)      # (context, [request]) not yet added
        self.contexts: dict[int, list[int]] = {}      # context sequence -> its requests
        self.parents: dict[int, tuple] = {}           # run context -> (its last row's logits, requests left)
        self.forks: dict[int, tuple[int, float, bool]] = {}  # fork -> (request, first logprob, first greedy)
        self.conts, self.out, self.held = conts, out, 0

    def run(self) -> None:
        while self.waiting or self.contexts or self.parents or self.forks:
            self._fork_ready()
            while self.waiting and self.held < self.batch.max_sequences - 1:
                ctx, members = self.waiting.popleft()
                self.contexts[self.batch.add(list(ctx), score=False)] = members
                self.held += 1
            for seq, _token, _logprob in self.batch.step():
                if seq in self.contexts:
                    self._context_ran(seq)
                else:
                    self._fork_ran(seq)

    def _context_ran(self, seq: int) -> None:
        members = self.contexts.pop(seq)
        logits = self.batch.logits(seq)
        self.b.set_pending(seq, [], False)  # it waits, running nothing, while its forks are made
        self.parents[seq] = (logits, collections.deque(members))

    def _fork_ready(self) -> None:
        for seq, (logits, members) in list(self.parents.items()):
            lp, best = log_softmax(logits), int(np.argmax(logits))
            while members and self.held < self.batch.max_sequences:
                n = members.popleft()
                cont = self.conts[n]
                if len(cont) == 1:  # the context's last row scores it alone
                    self.out[n] = (np.array([lp[cont[0]]]), np.array([best == cont[0]]))
                    continue
                fork = self.batch.fork(seq)
                self.b.set_pending(fork, cont[:-1], True)
                self.forks[fork] = (n, float(lp[cont[0]]), best == cont[0])
                self.held += 1
            if not members:
                self.batch.remove(seq)
                del self.parents[seq]
                self.held -= 1

    def _fork_ran(self, seq: int) -> None:
        n, first, first_greedy = self.forks.pop(seq)
        last = self.conts[n][-1]
        logits = self.batch.logits(seq)
        scores = [first, *self.b.scores(seq), float(log_softmax(logits)[last])]
        greedy = [first_greedy, *self.b.score_greedy(seq), int(np.argmax(logits)) == last]
        self.out[n] = (np.asarray(scores, dtype=np.float64), np.asarray(greedy, dtype=bool))
        self.batch.remove(seq)
        self.held -= 1
