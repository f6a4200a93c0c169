"""Throughput of a perplexity sweep (akunu.distributed.map) with 1, 2, 4 ... workers, and its
scaling against linear: items per second over the whole call (workers' start and model load
included), over the sweep proper (from the first finished batch to the last), and in the steady
state (from the moment every worker has sent a result to the moment the first one sends its
last: what a long sweep runs at, without the workers' staggered loads and the tail). Each
worker's share says how many items it ran, their mean wall and CPU time, and how busy it was.

    python bench/distributed_sweep.py MODEL [--workers 1,2,4] [--items 400] [--gpu] [--device cpu]
    python bench/distributed_sweep.py MODEL --address auto     # on a running Ray cluster
    python bench/distributed_sweep.py MODEL --task perplexity_batch   # a worker's batch in one call

Each worker holds one GPU with --gpu (resources {"GPU": 1}), else --cpus CPUs. The texts are
code-like lines of 1 to 16 lines each, the same for every worker count.
"""
from __future__ import annotations

import argparse
import collections
import os
import time

import ray

import akunu.distributed as ad

LINES = ["def fib(n):\n", "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", "import numpy as np\n",
         "x = np.zeros((3, 4))\n", "for i in range(10):\n", "    print(i, i * i)\n", "class Point:\n"]


def texts(n: int) -> list[str]:
    return [f"# {i}\n" + "".join(LINES[(i + k) % len(LINES)] for k in range(1 + i % 16)) for i in range(n)]


def timed(task: ad.Task) -> ad.Task:
    """`task` with each result stamped: [when it finished, its wall seconds, its process CPU
    seconds, the worker's pid, the result]; a batch run in one call shares its time equally."""
    def stamp(call, n: int) -> list:
        wall, cpu = time.perf_counter(), time.process_time()
        values = call()
        w, c = (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n
        return [[time.time(), w, c, os.getpid(), v] for v in values]

    def one(model, item, kwargs):
        return stamp(lambda: [task.one(model, item, kwargs)], 1)[0]

    def many(model, items, kwargs):
        return stamp(lambda: task.many(model, items, kwargs), len(items))

    return ad.Task(task.name + "-timed", task.load, one, arg=task.arg, many=many if task.many else None)


def report(results: list) -> tuple[str, float]:
    """(each worker's share: items, the mean item's wall and CPU ms, how busy it was from its first
    result to its last; items/s in the steady state, from the moment every worker had sent a
    result to the moment the first one sent its last)."""
    by_pid: dict[int, list] = collections.defaultdict(list)
    for r in results:
        by_pid[r[3]].append(r)
    parts = []
    for _, rs in sorted(by_pid.items()):
        first = min(rs, key=lambda r: r[0])
        wall, cpu = sum(r[1] for r in rs), sum(r[2] for r in rs)
        batch = sum(r[0] == first[0] for r in rs)  # the first batch's items (one stamp if run in one call)
        span = max(r[0] for r in rs) - first[0] + first[1] * batch
        parts.append(f"{len(rs)} items, {1e3 * wall / len(rs):.1f} ms wall / {1e3 * cpu / len(rs):.1f} ms CPU each"
                     + (f", busy {wall / span:.0%}" if span > 0 else ""))
    up = max(min(r[0] for r in rs) for rs in by_pid.values())
    end = min(max(r[0] for r in rs) for rs in by_pid.values())
    steady = sum(up < r[0] <= end for r in results) / (end - up) if end > up else float("nan")
    return "; ".join(parts), steady


def run(args, workers: int) -> tuple[float, float, float]:
    """(items/s over the call, from the first result to the last, in the steady state); prints
    each worker's share."""
    task = timed(ad.TASKS[args.task])
    resources = {"GPU": 1} if args.gpu else {"CPU": args.cpus}
    model_kwargs = {"device": args.device} if args.device else {}
    start = time.time()
    results = ad.map(args.model, texts(args.items), task=task, workers=workers, resources=resources,
                     model_kwargs=model_kwargs, batch_size=args.batch_size, progress=False)
    total = time.time() - start
    arrivals = sorted(r[0] for r in results)
    span = arrivals[-1] - arrivals[0]
    shares, steady = report(results)
    print(f"  workers {workers}: {shares}", flush=True)
    return args.items / total, (args.items - 1) / span if span > 0 else float("nan"), steady


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--items", type=int, default=400)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--task", default="perplexity", choices=["perplexity", "perplexity_batch"],
                   help="perplexity_batch: each batch in one Model.score_batch")
    p.add_argument("--gpu", action="store_true", help="one GPU per worker")
    p.add_argument("--cpus", type=int, default=1, help="CPUs per worker without --gpu")
    p.add_argument("--device", default=None, help="model_kwargs device (cpu for the CPU backend)")
    p.add_argument("--address", default=None, help="ray.init(address=...); default: a local cluster")
    p.add_argument("--num-gpus", type=int, default=None,
                   help="GPUs of a local cluster (default with --gpu: the Vulkan GPUs akunu lists; Ray's own "
                        "detection needs NVML)")
    p.add_argument("--log", action="store_true", help="show the workers' output")
    args = p.parse_args()
    gpus = args.num_gpus
    if gpus is None and args.gpu and args.address is None:
        import akunu
        gpus = sum(d["type"] != "cpu" for d in akunu.devices())
    ray.init(address=args.address, num_gpus=gpus if args.address is None else None, include_dashboard=False,
             log_to_driver=args.log)
    print("cluster:", {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}, flush=True)
    rows = []
    for n in [int(w) for w in args.workers.split(",")]:
        rates = run(args, n)
        rows.append((n, *rates))
        base = [r / rows[0][0] for r in rows[0][1:]]
        print(f"{args.task} workers {n}: " + ", ".join(
            f"{r:8.1f} items/s {what} ({r / (b * n):.2f}x linear)"
            for r, b, what in zip(rates, base, ("over the call", "in the sweep", "steady"))), flush=True)


if __name__ == "__main__":
    main()
