"""The server's models for the solo path: one loaded Model and parallel - 1 forks of it, each
serving one request at a time.

A Model runs one sequence. Requests that the server's batch does not run (akunu serve --batch,
server/batcher.py; without it, every request) queue for a free model (first come, first
served) and run on it to the end; with parallel > 1 that many run at once, each on its own
fork (same weights, its own KV cache and scratch). With a batch beside them, every token of
the solo path runs under the lock the batch's steps take, so the two never run at once. The blocking engine
calls run in worker threads (the engine lets go of the GIL while it runs), so the event loop
keeps answering. A generation streams its pieces through an asyncio queue; a request whose
client goes away sets its cancel flag, the worker closes its stream at the next token (which
rewinds the cache), and the model goes back to the pool.
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable

_DONE = object()


class ModelPool:
    def __init__(self, model, parallel: int = 1, lock=None):
        if parallel < 1:
            raise ValueError(f"parallel must be >= 1, got {parallel}")
        if parallel > 1 and getattr(getattr(model, "device", None), "backend", "") == "cpu":
            # Forks on akunu's CPU backend give wrong results when they run at once from two
            # threads (they share the backend's workers), so requests run one at a time there.
            print("akunu serve: the CPU backend runs one request at a time; --parallel is ignored", file=sys.stderr)
            parallel = 1
        self.model = model
        self.models = [model] + [model.fork() for _ in range(parallel - 1)] if hasattr(model, "fork") else [model]
        self._free: asyncio.Queue | None = None
        self.lock = lock or contextlib.nullcontext()  # taken around every item a job yields

    def _queue(self) -> asyncio.Queue:
        if self._free is None:  # made on the event loop that serves the requests
            self._free = asyncio.Queue()
            for m in self.models:
                self._free.put_nowait(m)
        return self._free

    @property
    def idle(self) -> int:
        """Models free to take a request now."""
        return self._queue().qsize()

    async def run(self, job: Callable):
        """job(model) on a free model, in a worker thread; returns what it returns."""
        model = await self._queue().get()
        try:
            return await asyncio.to_thread(job, model)
        finally:
            self._queue().put_nowait(model)

    async def stream(self, job: Callable[[object, threading.Event], Iterable]) -> AsyncIterator:
        """The items of job(model, cancel), an iterable that the worker thread runs on a free
        model, as they come. Closing this iterator early (the client went away) sets cancel;
        the job's iterable is closed at its next item and the model returns to the pool."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue = asyncio.Queue()
        cancel = threading.Event()

        def work(model):
            it = iter(job(model, cancel))
            try:
                while True:
                    with self.lock:
                        item = next(it, _DONE)
                    if item is _DONE:
                        break
                    loop.call_soon_threadsafe(items.put_nowait, item)
                    if cancel.is_set():
                        break
            except BaseException as e:  # handed to the request, raised there
                loop.call_soon_threadsafe(items.put_nowait, e)
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    with self.lock:
                        close()
                loop.call_soon_threadsafe(items.put_nowait, _DONE)

        task = asyncio.ensure_future(self.run(work))
        try:
            while (item := await items.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            cancel.set()
            await asyncio.shield(task)  # the model is back in the pool before the request ends
