"""The server's batch: the choices of every request it can run decode together in one
akunu.Batch (continuous batching, docs/server.md).

A thread runs the batch a step at a time while it holds sequences. Between steps it takes in
the choices that wait (as many as the batch has sequences free; the others wait in order) and
drops those whose request went away, so requests join and leave between steps. Each choice is
a sequence with its own sampler (a request's choice k samples with seed + k, as the solo path
does), stop strings, max_tokens and logprobs; its tokens reach the request's asyncio queue as
(choice index, Piece), then (choice index, Generation), the items ModelPool.stream yields.

What the batch does not run goes through the solo path (ModelPool): logit controls that need
the logits on the host (penalties, logit_bias, response_format's processors) and echo with
prompt logprobs. Both paths share one lock, taken per step and per solo token, so the batch
and the model never run at once.
"""
from __future__ import annotations

import asyncio
import collections
import threading

import numpy as np

from akunu.batch import Batch, _Running
from akunu.controls import LogitControls, log_softmax
from akunu.sampling import Sampler
from akunu.server.openai_api import Echo, Plan

_DONE = object()


def batchable(p: Plan) -> bool:
    """Whether the batch runs this request: every control it asks for is one the batch has."""
    k = p.kwargs
    host = LogitControls(k["repetition_penalty"], k["presence_penalty"], k["frequency_penalty"], k["logit_bias"])
    return not (host.on_host or p.make_processors or k["prompt_logprobs"])


class _Request:
    """One request's queue, on the event loop that serves it; the batch thread puts into it."""

    def __init__(self, loop, choices: int, on_token):
        self.loop, self.items, self.left = loop, asyncio.Queue(), choices
        self.cancel = threading.Event()
        self.on_token = on_token

    def put(self, item) -> None:
        self.loop.call_soon_threadsafe(self.items.put_nowait, item)


class _Choice:
    """A choice of a request: a sequence of the batch once it joins."""

    def __init__(self, request: _Request, index: int, ids: list[int], sampler: Sampler, p: Plan, model):
        self.request, self.index, self.ids, self.sampler = request, index, ids, sampler
        self.max_tokens, self.top_n, self.echo = p.max_tokens, p.kwargs["logprobs"], p.echo is not None
        self.run = _Running(model, ids, list(p.kwargs["stop"] or []))

    def top(self, logits: np.ndarray) -> list[tuple[int, float]] | None:
        """The step's top-N (id, logprob) pairs of the raw distribution, as the solo path's."""
        return LogitControls(top_logprobs=self.top_n).top(log_softmax(logits)) if self.top_n else None


class Batcher:
    """One akunu.Batch of up to max_sequences sequences over `model`, run by its own thread."""

    def __init__(self, model, max_sequences: int, lock: threading.Lock):
        if max_sequences < 1:
            raise ValueError(f"the batch's max_sequences must be >= 1, got {max_sequences}")
        self.model, self.max_sequences, self.lock = model, max_sequences, lock
        self._cv = threading.Condition()
        self._waiting: collections.deque[_Choice] = collections.deque()
        self._running: dict[int, _Choice] = {}
        self._batch = Batch(model, max_sequences=max_sequences)  # its pool is allocated now: errors at start
        self._thread: threading.Thread | None = None
        self._stop_ids = set(model.tokenizer.stop_ids)
        self.counts = {"steps": 0, "batched_steps": 0, "most_sequences_in_a_step": 0, "sequences": 0}

    def stats(self) -> dict:
        """What /health reports: steps run, steps with more than one sequence, the most
        sequences one step ran, sequences run, and the sequences running and waiting now."""
        with self._cv:
            return dict(self.counts, max_sequences=self.max_sequences, running=len(self._running),
                        waiting=len(self._waiting))

    async def stream(self, p: Plan, on_token=lambda: None):
        """The request's items as its choices produce them (ModelPool.stream's contract):
        (index, Echo) first with echo, then (index, Piece) per token and (index, Generation)
        when a choice ends. Closing it early (the client went away) drops its sequences."""
        request = _Request(asyncio.get_running_loop(), len(p.prompts) * p.n, on_token)
        choices = [_Choice(request, i * p.n + k, ids, Sampler(p.sampler.temperature, p.sampler.top_k, p.sampler.top_p,
                                                              p.sampler.min_p, (p.sampler.seed + k) % 2**64), p,
                           self.model)
                   for i, ids in enumerate(p.prompts) for k in range(p.n)]
        with self._cv:
            self._waiting.extend(choices)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="akunu-batch", daemon=True)
                self._thread.start()
            self._cv.notify()
        try:
            while (item := await request.items.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            request.cancel.set()

    # ---- the batch thread --------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._waiting and not self._running:
                    self._cv.wait()
                joining = []
                while self._waiting and len(self._running) + len(joining) < self.max_sequences:
                    joining.append(self._waiting.popleft())
            with self.lock:
                for c in joining:
                    self._join(c)
                self._drop_cancelled()
                if self._running:
                    self._step()

    def _join(self, c: _Choice) -> None:
        if c.request.cancel.is_set():
            return
        s = c.sampler
        try:
            seq = self._batch.add(c.ids, s)
        except Exception as e:  # a prompt the batch refuses: its request gets the error
            return self._fail(c, e)
        with self._cv:
            self._running[seq] = c
            self.counts["sequences"] += 1
        if c.echo:  # the prompt's text comes first (the batch has no prompt logprobs to add)
            c.request.put((c.index, Echo(c.run.result)))

    def _step(self) -> None:
        n = len(self._running)
        try:
            tokens = self._batch.step(wait=True)
        except Exception as e:  # the step changed nothing: its sequences' requests get the error
            for seq, c in list(self._running.items()):
                self._end(seq)
                self._fail(c, e)
            return
        self.counts["steps"] += 1
        self.counts["batched_steps"] += n > 1
        self.counts["most_sequences_in_a_step"] = max(self.counts["most_sequences_in_a_step"], n)
        for seq, token, logprob in tokens:
            c = self._running[seq]
            top = c.top(self._batch.logits(seq)) if c.top_n else None
            full = self._batch.length(seq) >= self.model.context
            try:
                piece, done = c.run.take(token, logprob, self._stop_ids, c.max_tokens, full, top)
            except Exception as e:
                self._end(seq)
                self._fail(c, e)
                continue
            if piece is not None:
                c.request.on_token()
                c.request.put((c.index, piece))
            if done:
                self._end(seq)
                c.request.put((c.index, c.run.result))
                self._finish_one(c.request)

    def _drop_cancelled(self) -> None:
        for seq, c in list(self._running.items()):
            if c.request.cancel.is_set():
                self._end(seq)

    def _end(self, seq: int) -> None:
        self._batch.remove(seq)
        with self._cv:
            del self._running[seq]

    def _fail(self, c: _Choice, e: BaseException) -> None:
        c.request.put(e)
        c.request.cancel.set()  # its other choices leave at the next step

    @staticmethod
    def _finish_one(request: _Request) -> None:
        request.left -= 1
        if request.left == 0:
            request.put(_DONE)
