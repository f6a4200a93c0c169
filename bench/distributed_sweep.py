"""Throughput of a perplexity sweep (akunu.distributed.map) with 1, 2, 4 ... workers, and its
scaling against linear: items per second over the whole call (workers' start and model load
included) and over the sweep proper (from the first finished batch to the last).

    python bench/distributed_sweep.py MODEL [--workers 1,2,4] [--items 400] [--gpu] [--device cpu]
    python bench/distributed_sweep.py MODEL --address auto     # on a running Ray cluster

Each worker holds one GPU with --gpu (resources {"GPU": 1}), else --cpus CPUs. The texts are
code-like lines of 1 to 16 lines each, the same for every worker count.
"""
from __future__ import annotations

import argparse
import time

import ray

import akunu.distributed as ad

LINES = ["def fib(n):\n", "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", "import numpy as np\n",
         "x = np.zeros((3, 4))\n", "for i in range(10):\n", "    print(i, i * i)\n", "class Point:\n"]


def texts(n: int) -> list[str]:
    return [f"# {i}\n" + "".join(LINES[(i + k) % len(LINES)] for k in range(1 + i % 16)) for i in range(n)]


PERPLEXITY = ad.TASKS["perplexity"]


def timed_perplexity(model, text, kwargs) -> list:
    """[when it finished, the perplexity]: the perplexity row, stamped."""
    value = PERPLEXITY.one(model, text, kwargs)
    return [time.time(), value]


def run(args, workers: int) -> tuple[float, float]:
    """(items/s over the call, items/s from the first result to the last)."""
    timed = ad.Task("perplexity-timed", PERPLEXITY.load, timed_perplexity, arg=PERPLEXITY.arg)
    resources = {"GPU": 1} if args.gpu else {"CPU": args.cpus}
    model_kwargs = {"device": args.device} if args.device else {}
    start = time.time()
    results = ad.map(args.model, texts(args.items), task=timed, workers=workers, resources=resources,
                     model_kwargs=model_kwargs, batch_size=args.batch_size, progress=False)
    total = time.time() - start
    arrivals = sorted(r[0] for r in results)
    span = arrivals[-1] - arrivals[0]
    return args.items / total, (args.items - 1) / span if span > 0 else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--items", type=int, default=400)
    p.add_argument("--batch-size", type=int, default=8)
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
        whole, sweep = run(args, n)
        rows.append((n, whole, sweep))
        base_whole, base_sweep = rows[0][1] / rows[0][0], rows[0][2] / rows[0][0]
        print(f"workers {n}: {whole:8.1f} items/s over the call ({whole / (base_whole * n):.2f}x linear), "
              f"{sweep:8.1f} items/s in the sweep ({sweep / (base_sweep * n):.2f}x linear)", flush=True)


if __name__ == "__main__":
    main()
