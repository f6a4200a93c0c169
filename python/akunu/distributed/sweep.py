"""akunu.distributed.map: one call over many items, spread over Ray actors that each hold a model.

The driver keeps the items in a queue of batches and hands each worker its next batch as soon
as one of its two in flight comes back, so that a fast worker takes more of them. Finished
records go to the result file as they arrive (akunu.distributed.results) and are kept by index,
each once: the results come back in input order whatever order the workers finish in.

Faults, from the cheapest remedy up:
- a worker process that dies is restarted by Ray (max_restarts), which runs its unfinished
  batches again (max_task_retries): nothing is lost, and a batch's records arrive once;
- an actor that is gone for good (restarts spent, ray.kill, its node lost) is replaced by a
  new one, and its unfinished batches go back to the head of the queue;
- a batch that worker deaths keep stopping is split into single items, and an item that kills
  its worker again is recorded as an error, like an item whose call raised. A batch that a death
  stopped runs alone on its worker from then on, so a later death is blamed on it alone.
"""
from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable, Iterable

from akunu import _progress
from akunu.distributed.results import ResultFile, header
from akunu.distributed.tasks import Task, lookup
from akunu.distributed.worker import SweepWorker

IN_FLIGHT = 2  # batches per worker: one running, one waiting, so that a worker never idles on the driver
DEATHS = 2  # worker deaths a batch may see before it is split, or its single item recorded as an error


@dataclasses.dataclass(frozen=True)
class ItemError:
    """What map returns for an item whose call raised (or that killed its worker): the
    exception's type and message, as the result file records it."""

    message: str

    def __str__(self) -> str:
        return self.message


class Results(list):
    """map's results in input order (an ItemError where an item failed), with counts: computed
    (the records workers sent back in this call), resumed (those read from the result file),
    replaced (workers gone for good and replaced by new ones) and failed (the ItemErrors)."""

    computed: int = 0
    resumed: int = 0
    replaced: int = 0

    @property
    def failed(self) -> int:
        return sum(isinstance(r, ItemError) for r in self)


@dataclasses.dataclass
class _Batch:
    items: list  # [(index, item)]
    deaths: int = 0  # times a worker died running it and Ray's retries did not save it


def map(model_path, items: Iterable, task: str | Task = "score", workers: int = 2,  # the builtin map is not used here
        resources: dict | None = None, model_kwargs: dict | None = None, task_kwargs: dict | None = None,
        output: str | os.PathLike | None = None, parquet: bool | None = None, batch_size: int = 8,
        progress: bool | None = None, max_restarts: int = 2) -> Results:
    """Runs `task` over `items` on `workers` Ray actors, each with its own model loaded from
    model_path (the same path on every node), and returns the results in input order.

    task: "score" (Model.score: log-probabilities, a float64 array), "perplexity"
    (Model.perplexity: a float), "generate" (Model.generate: a Generation, without its
    timings), "embed" (Encoder.embed or Model.embed: a float32 vector), "transcribe" (the
    Whisper model's transcribe(audio)), "score_batch" and "perplexity_batch" (a worker's batch
    in one Model.score_batch: faster on a GPU, within the batch's tolerance of score and
    perplexity, docs/distributed.md), or an akunu.distributed.Task of your own. An item is
    the call's input (token ids or text, a prompt, a text, an audio file), or a dict holding it
    under the Task's arg ("ids", "text", "prompt", "text", "audio") with keyword arguments for
    that item's call; task_kwargs go to every call (max_tokens=, sampler= ...). model_kwargs
    go to the model's constructor on each worker (device="cpu", context=...); without a
    device, a worker holding a GPU resource runs on that GPU.

    resources: the Ray resources each worker holds (default {"CPU": 1}; {"GPU": 1} puts each
    worker on its own GPU); workers that do not fit the cluster now wait for room, and workers
    that would not fit even an idle cluster are refused with a ValueError. batch_size:
    items per batch handed to a worker. Ray must be initialized (ray.init(), or
    ray.init(address=...) for a cluster); if not, map calls ray.init().

    output: the JSONL result file, written as results arrive; an existing file of the same
    sweep is resumed (only the items it lacks are computed), one of another sweep is refused.
    parquet: also write the records to output's .parquet sibling (None: where pyarrow is
    installed). An item whose call raises becomes an ItemError; the sweep goes on. A worker
    that dies is restarted up to max_restarts times, then replaced, and its unfinished items
    run again elsewhere: each item's record arrives once. progress: a bar with items per
    second (None: on a terminal or in a notebook)."""
    import ray

    task = lookup(task)
    items = list(items)
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    path, task_kwargs = os.fspath(model_path), dict(task_kwargs or {})
    model_kwargs = dict(model_kwargs or {})
    file = _open(output, parquet, task, path, items, model_kwargs, task_kwargs)
    records = dict(file.done) if file else {}
    out = Results()
    out.resumed = len(records)
    todo = [i for i in range(len(items)) if i not in records]
    bar = _progress.bar(len(items), f"akunu {task.name}", "item", progress, initial=len(records))
    try:
        if todo:
            if not ray.is_initialized():
                ray.init()
            _check_fits(resources)
            queue = collections.deque(_Batch([(i, items[i]) for i in todo[at:at + batch_size]])
                                      for at in range(0, len(todo), batch_size))
            sweep = _Sweep(path, task, model_kwargs, task_kwargs, workers, resources, max_restarts)
            try:
                out.computed = sweep.run(queue, _Sink(records, file, bar).deliver)
            finally:
                sweep.close()
                out.replaced = sweep.replaced
    finally:
        bar.close()
        if file:
            file.close()
    out.extend(ItemError(r["error"]) if "error" in r else task.result(r["result"])
               for r in (records[i] for i in range(len(items))))
    return out


def _open(output, parquet, task: Task, path: str, items: list, model_kwargs: dict,
          task_kwargs: dict) -> ResultFile | None:
    if output is None:
        return None
    output = os.fspath(output)
    if output.endswith(".parquet"):
        raise ValueError(f"output {output!r}: name the JSONL result file (such as results.jsonl); the Parquet copy "
                         "goes beside it, under the same name with .parquet")
    if parquet is None:
        try:
            import pyarrow.parquet  # noqa: F401
            parquet = True
        except ImportError:
            parquet = False
    sibling = os.path.splitext(output)[0] + ".parquet" if parquet else None
    arrow = task.arrow() if parquet and task.arrow else None
    return ResultFile(output, header(task, path, items, model_kwargs, task_kwargs), sibling, arrow)


class _Sink:
    """Where records arrive: kept by index (each once), appended to the file, counted on the bar
    (with the failed items beside it)."""

    def __init__(self, records: dict, file: ResultFile | None, bar):
        self.records, self.file, self.bar = records, file, bar
        self.failed = sum("error" in r for r in records.values())

    def deliver(self, batch_records: list[dict]) -> None:
        new = [r for r in batch_records if r["index"] not in self.records]
        for r in new:
            self.records[r["index"]] = r
        if self.file and new:
            self.file.append(new)
        self.failed += sum("error" in r for r in new)
        if self.failed:
            self.bar.set_postfix_str(f"{self.failed} failed")
        self.bar.update(len(new))


def _check_fits(resources: dict | None) -> None:
    """Refuses workers that no amount of waiting would place: a resource the whole cluster has
    less of than one worker needs (a GPU sweep on a Ray started without GPUs) would leave the
    sweep waiting for ever. An autoscaling cluster's nodes to come are not counted."""
    import ray

    have = ray.cluster_resources()
    listed = ", ".join(f"{k} {v:g}" for k, v in sorted(have.items()) if "/" not in k and ":" not in k)
    for key, need in (resources or {"CPU": 1}).items():
        if have.get(key, 0) < need:
            raise ValueError(f"each worker needs {need} {key}, but the Ray cluster has {have.get(key, 0):g} in all "
                             f"({listed}): start Ray with them (ray.init(num_gpus=N), `ray start --num-gpus N`) or ask "
                             "for fewer")


def _actor_options(resources: dict | None, max_restarts: int) -> dict:
    """ray.remote options for a worker: Ray spells CPU and GPU as num_cpus and num_gpus."""
    res = dict(resources or {"CPU": 1})
    options = {"num_cpus": res.pop("CPU", 1), "num_gpus": res.pop("GPU", 0), "max_restarts": max_restarts,
               "max_task_retries": max_restarts}
    if res:
        options["resources"] = res
    return options


class _Sweep:
    """The workers and the batches in flight on each."""

    def __init__(self, path: str, task: Task, model_kwargs: dict, task_kwargs: dict, workers: int,
                 resources: dict | None, max_restarts: int):
        import ray

        self._remote = ray.remote(SweepWorker).options(**_actor_options(resources, max_restarts))
        self._args = (path, task, model_kwargs, task_kwargs)
        self._path, self._model_kwargs = path, model_kwargs
        self.actors = [self._remote.remote(*self._args) for _ in range(workers)]
        self._spares = max(8, 2 * workers)  # replacements for actors gone for good
        self.replaced = 0
        self._in_flight: dict = {}  # ObjectRef -> (actor, _Batch)

    def run(self, queue: collections.deque, deliver: Callable[[list[dict]], None]) -> int:
        """Runs every batch of `queue`, handing each batch's records to deliver; returns how many
        records the workers sent back."""
        import ray
        from ray.exceptions import RayActorError, RayError

        received = 0
        while queue or self._in_flight:
            self._fill(queue)
            ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                actor, batch = self._in_flight.pop(ref)
                try:
                    records = ray.get(ref)
                except RayActorError as e:
                    self._lost(actor, batch, e, queue, deliver)
                except RayError as e:  # the call itself failed (not an item): isolate the items
                    self._retry_alone(batch, f"{type(e).__name__}: {e}", queue, deliver)
                else:
                    received += len(records)
                    deliver(records)
        return received

    def close(self) -> None:
        """Ends the workers now, giving their resources back for the next sweep."""
        import ray

        for actor in self.actors:
            ray.kill(actor)

    def _fill(self, queue: collections.deque) -> None:
        """Hands each worker batches up to IN_FLIGHT. A batch that a worker death stopped runs
        alone on an idle worker, so that a death while it runs is its own and never counts
        against an innocent batch beside it."""
        busy = collections.Counter(id(actor) for actor, _ in self._in_flight.values())
        alone = {id(actor) for actor, batch in self._in_flight.values() if batch.deaths}
        for actor in self.actors:
            while queue and busy[id(actor)] < IN_FLIGHT and id(actor) not in alone:
                if queue[0].deaths and busy[id(actor)]:
                    break  # it waits for a worker with nothing in flight
                batch = queue.popleft()
                self._in_flight[actor.run.remote(batch.items)] = (actor, batch)
                busy[id(actor)] += 1
                if batch.deaths:
                    alone.add(id(actor))
        if queue and not self._in_flight:
            raise RuntimeError(f"every sweep worker is gone and none could replace them; {len(queue)} batches are left "
                               "(their items are not in the result file: run the same call again to finish)")

    def _lost(self, actor, batch: _Batch, error, queue: collections.deque, deliver) -> None:
        """A worker died under `batch` and Ray could not save it: replace the worker if it is gone
        for good, and run the batch again (split, or its item recorded, after DEATHS deaths)."""
        from ray.exceptions import ActorDiedError

        if error.actor_init_failed:  # Ray's text ends with the worker's traceback: its last line says why
            why = [line for line in str(error).splitlines() if line.strip()][-1]
            raise RuntimeError(f"a sweep worker could not load {self._path} with model_kwargs "
                               f"{self._model_kwargs}: {why}") from None
        if isinstance(error, ActorDiedError) and any(a is actor for a in self.actors):
            self.actors = [a for a in self.actors if a is not actor]
            if self._spares > 0:
                self._spares -= 1
                self.replaced += 1
                self.actors.append(self._remote.remote(*self._args))
        batch.deaths += 1
        if batch.deaths < DEATHS:
            queue.appendleft(batch)
        else:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self._retry_alone(batch, f"the worker died running this item: {first}", queue, deliver)

    @staticmethod
    def _retry_alone(batch: _Batch, why: str, queue: collections.deque, deliver) -> None:
        """A batch of several items goes back as single items; a single item is recorded as failed."""
        if len(batch.items) == 1:
            deliver([{"index": batch.items[0][0], "error": why}])
        else:
            queue.extendleft(_Batch([pair]) for pair in reversed(batch.items))
