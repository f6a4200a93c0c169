"""Evaluation sweeps on a Ray cluster: one call over many items, on many workers.

    import ray, akunu.distributed
    ray.init()                                     # or ray.init(address="head:6379") for a cluster
    ppl = akunu.distributed.map("model.gguf", texts, task="perplexity", workers=4,
                                resources={"GPU": 1}, output="ppl.jsonl")

Each worker is a Ray actor with one model loaded (akunu.Model, akunu.Encoder, or a Whisper
model); batches of items go to whichever worker is free, results come back in input order, a
JSONL (and Parquet) file records them as they arrive and lets an interrupted sweep resume, and
a worker that dies has its unfinished items run again elsewhere. docs/distributed.md shows a
run on one machine and on several.
"""
from __future__ import annotations

from akunu.distributed.sweep import ItemError, Results, map  # map: the API's name, over the builtin here
from akunu.distributed.tasks import TASKS, Task

__all__ = ["map", "Task", "TASKS", "ItemError", "Results"]
