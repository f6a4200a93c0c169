"""A sweep's worker: one Ray actor holding one loaded model, running the batches it is handed.

The actor loads its model once (a restarted actor loads it again) on the device Ray gave it:
the GPU of its GPU resource, or akunu's CPU backend with as many threads as the CPUs it holds,
unless model_kwargs name a device. Running a batch never raises for an item: a bad item comes
back as that item's error (tasks.run_batch).
"""
from __future__ import annotations

import os

from akunu.distributed.tasks import Task, run_batch


def _gpu_device(gpu_ids) -> int | None:
    """akunu's index of the Ray-assigned GPU: the n-th GPU akunu lists for Ray's GPU n, or the
    first where akunu sees only the GPUs Ray gave (a driver that follows CUDA_VISIBLE_DEVICES)."""
    import akunu

    if not gpu_ids:
        return None
    gpus = [d["index"] for d in akunu.devices() if d["type"] != "cpu"]
    if len(gpus) == len(gpu_ids):
        return gpus[0]
    n = int(gpu_ids[0])
    if n >= len(gpus):
        raise RuntimeError(f"Ray assigned GPU {n}, but akunu sees {len(gpus)} GPU(s) on this node: "
                           f"{[d['name'] for d in akunu.devices()]}")
    return gpus[n]


class SweepWorker:
    """The actor's class (map wraps it with ray.remote and the resources asked for)."""

    def __init__(self, model_path: str, task: Task, model_kwargs: dict, task_kwargs: dict):
        import ray

        kwargs = dict(model_kwargs)
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
        if cpus and "AKUNU_THREADS" not in os.environ:  # the CPU backend runs on the CPUs Ray gave it
            os.environ["AKUNU_THREADS"] = str(max(1, int(cpus)))
        if "device" not in kwargs:
            gpu = _gpu_device(ray.get_gpu_ids())
            if gpu is not None:
                kwargs["device"] = gpu
        self._task, self._kwargs = task, dict(task_kwargs)
        self._model = task.load(model_path, kwargs)

    def run(self, batch: list) -> list[dict]:
        """Records of a batch of (index, item) pairs (tasks.run_batch)."""
        return run_batch(self._task, self._model, batch, self._kwargs)

    def describe(self) -> dict:
        """The worker's process id and its model (its repr), for logs and tests."""
        return {"pid": os.getpid(), "model": repr(self._model)}
