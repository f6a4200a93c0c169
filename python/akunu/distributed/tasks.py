"""The calls a sweep runs, as rows of one table (akunu.distributed.map's task=).

A row says how a worker loads its model, how it runs one item (and, where the call takes many
at once, a whole batch), how a result is written into the result file as JSON and read back,
and which Parquet type holds it. Every row calls the public method of akunu.Model,
akunu.Encoder or the Whisper model that a single process would call, so a sweep computes what
that process computes. score and perplexity run item by item, so an item's result is the same
bits whatever batch it came in. score_batch and perplexity_batch run a worker's whole batch as
one Model.score_batch (batched prefill, log-probabilities worked out on the device): faster on
a GPU, with results within the batch's tolerance of score()'s whose last bits depend on the
batch an item ran in (a fresh sweep's batches are fixed slices of the items, so it repeats
them; a resumed sweep or a retried item may not). Results cross processes as JSON values: what
a fresh sweep returns and what a resumed one reads from its file are the same.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Task:
    """One kind of call a sweep runs. An item is the call's input, or a dict holding the input
    under `arg` and keyword arguments of that item's call (over map's task_kwargs).

    load(path, model_kwargs) -> model; one(model, input, kwargs) -> a JSON value;
    many(model, inputs, kwargs) -> a list of JSON values (optional: a batch in one call);
    read(JSON value) -> what map returns (None: the JSON value); arrow() -> the Parquet column's pyarrow type (None:
    the JSON text)."""

    name: str
    load: Callable[[str, dict], Any]
    one: Callable[[Any, Any, dict], Any]
    arg: str
    many: Callable[[Any, Sequence, dict], list] | None = None
    read: Callable[[Any], Any] | None = None
    arrow: Callable[[], Any] | None = None

    def result(self, value):
        """What map returns for a result's JSON value."""
        return value if self.read is None else self.read(value)


def plain(value):
    """value as JSON-native types: NumPy arrays and scalars, dataclasses, objects (their public
    attributes), tuples, dicts and lists turned into lists, dicts, numbers and strings."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "__dict__"):  # a result object (a transcription): its public attributes
        return {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    raise TypeError(f"a sweep result must be JSON-like (numbers, strings, lists, dicts, arrays, dataclasses, "
                    f"objects of those); got a {type(value).__name__}")


# ---- the calls -----------------------------------------------------------------------------------
def _model(path: str, kwargs: dict):
    import akunu

    return akunu.Model(path, **kwargs)


def _any(path: str, kwargs: dict):
    """akunu.load: an Encoder, a Model, or (where akunu has it) a Whisper model, from the file."""
    import akunu

    return akunu.load(path, **kwargs)


_TIMES = ("time_to_first_token", "decode_seconds")  # speeds, not results: left out of the file


def _generation(g) -> dict:
    return {k: v for k, v in plain(g).items() if k not in _TIMES}


def _read_generation(value):
    from akunu.sampling import Generation

    if isinstance(value, list):  # n > 1 samples
        return [_read_generation(v) for v in value]
    return Generation(**value)


def _generate(model, prompt, kwargs: dict):
    g = model.generate(prompt, **{"stream": False, **kwargs})
    return [_generation(s) for s in g] if isinstance(g, list) else _generation(g)


def _transcribe(model, audio, kwargs: dict):
    if not hasattr(model, "transcribe"):
        raise TypeError(f"{model!r} has no transcribe(): task 'transcribe' needs a Whisper model")
    return plain(model.transcribe(audio, **kwargs))


def _scores(model, sequences, kwargs: dict) -> list:
    """Model.score_batch of a worker's batch (token lists or texts): one batched prefill whose
    log-probabilities are worked out on the device."""
    return [s.tolist() for s in model.score_batch(list(sequences), **kwargs)]


def _perplexities(model, texts, kwargs: dict) -> list:
    """Model.perplexity(text, batch=True) of each text of a worker's batch, all scored in one
    score_batch."""
    from akunu.token_ids import prompt_ids

    ids = [prompt_ids(t, model.config.vocab_size, "perplexity", model.tokenize, bytes_text=True) for t in texts]
    return [math.exp(-float(np.mean(s))) for s in model.score_batch(ids, **kwargs)]


def _arrow(name: str):
    def make():
        import pyarrow as pa

        return {"list64": pa.list_(pa.float64()), "list32": pa.list_(pa.float32()), "f64": pa.float64()}[name]
    return make


TASKS: dict[str, Task] = {t.name: t for t in [
    Task("score", _model, lambda m, ids, kw: m.score(ids, **{"progress": False, **kw}).tolist(), arg="ids",
         read=lambda v: np.asarray(v, dtype=np.float64), arrow=_arrow("list64")),
    Task("perplexity", _model, lambda m, text, kw: float(m.perplexity(text, **{"progress": False, **kw})),
         arg="text", read=float, arrow=_arrow("f64")),
    Task("generate", _model, _generate, arg="prompt", read=_read_generation),
    Task("embed", _any, lambda m, text, kw: m.embed([text], **kw)[0].tolist(), arg="text",
         many=lambda m, texts, kw: m.embed(list(texts), **kw).tolist(),
         read=lambda v: np.asarray(v, dtype=np.float32), arrow=_arrow("list32")),
    Task("transcribe", _any, _transcribe, arg="audio"),
    Task("score_batch", _model, lambda m, ids, kw: _scores(m, [ids], kw)[0], arg="ids", many=_scores,
         read=lambda v: np.asarray(v, dtype=np.float64), arrow=_arrow("list64")),
    Task("perplexity_batch", _model, lambda m, text, kw: _perplexities(m, [text], kw)[0], arg="text",
         many=_perplexities, read=float, arrow=_arrow("f64")),
]}


def lookup(task: str | Task) -> Task:
    """The Task named `task` (a Task is taken as it is)."""
    if isinstance(task, Task):
        return task
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)} (or an akunu.distributed.Task), not {task!r}")
    return TASKS[task]


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def run_batch(task: Task, model, batch: Sequence[tuple[int, Any]], kwargs: dict) -> list[dict]:
    """The records of a batch of (index, item), in its order: {"index", "result"} or, where that
    item's call raised, {"index", "error"}. A batched call that raises is redone item by item,
    so that one bad item fails alone."""
    if task.many is not None and len(batch) > 1 and not any(isinstance(x, dict) for _, x in batch):
        try:
            values = task.many(model, [x for _, x in batch], kwargs)
            return [{"index": i, "result": v} for (i, _), v in zip(batch, values)]
        except Exception:  # each item is tried alone below, and its error recorded
            pass
    out = []
    for index, item in batch:
        try:
            value, item_kwargs = _split(task, item, kwargs)
            out.append({"index": index, "result": task.one(model, value, item_kwargs)})
        except Exception as e:  # a bad item is a result of the sweep, not its end
            out.append({"index": index, "error": _error(e)})
    return out


def _split(task: Task, item, kwargs: dict) -> tuple[Any, dict]:
    """(the call's input, its keyword arguments) for one item."""
    if not isinstance(item, dict):
        return item, kwargs
    if task.arg not in item:
        raise ValueError(f"a dict item of task {task.name!r} holds its input under {task.arg!r}; got keys "
                         f"{sorted(item)}")
    rest = {k: v for k, v in item.items() if k != task.arg}
    return item[task.arg], {**kwargs, **rest}
