"""Decode and prefill of one model on one device against the same model split by layers
(docs/devices.md), for the hand-off overhead: a split step runs its parts one after the other
and passes the residual stream through host memory at each boundary, and runs one step per
submission (no chains), so the single device is also measured with chain=1.

    python bench/split_bench.py MODEL.gguf --devices vulkan:0,vulkan:1 [--split 16,16]

With --batch, batched decode instead (akunu.Batch, as `python -m akunu bench --batch` measures
it): one device, then the split with each --microbatches count (tuning split_microbatches: with
2, each device runs one half of a step's rows while the other runs the other half), at each
batch size; aggregate decode tok/s after a prompt of --batch-pp tokens per sequence.

    python bench/split_bench.py MODEL.gguf --devices vulkan:0,vulkan:1 --batch 1,8,32 --microbatches 1,2
"""

import argparse
import os
import time

import numpy as np

import akunu
from akunu.batch_bench import run_one
from akunu.bench import copy_bandwidth


def decode_rate(m: akunu.Model, prompt: list[int], tokens: int) -> float:
    m.generate(prompt, max_tokens=4, stream=False)  # warm
    out = m.generate(prompt, max_tokens=tokens, stream=False)
    return (len(out.token_ids) - 1) / out.decode_seconds


def prefill_rate(m: akunu.Model, prompt: list[int]) -> float:
    m.eval(prompt)  # warm
    start = time.perf_counter()
    m.eval(prompt)
    return len(prompt) / (time.perf_counter() - start)


def measure(model: str, prompt: list[int], tokens: int, kwargs: dict) -> tuple[float, float] | str:
    """(prefill tok/s, decode tok/s), or why the model did not load (a single device too small
    for it)."""
    try:
        m = akunu.Model(model, context=len(prompt) + tokens + 16, progress=False, **kwargs)
    except akunu.Error as e:
        return str(e).splitlines()[0]
    try:
        return prefill_rate(m, prompt), decode_rate(m, prompt[:16], tokens)
    finally:
        del m


def batch_rates(model: str, sizes: list[int], pp: int, tokens: int, kwargs: dict) -> list[float] | str:
    """Aggregate decode tok/s at each batch size, or why the model did not load."""
    try:
        # Sequences that finish their prompts early decode while the others' prompts run: up to a
        # token a step, and the prompt phase takes at most a step per sequence.
        m = akunu.Model(model, context=pp + tokens + max(sizes) + 16, progress=False, **kwargs)
    except akunu.Error as e:
        return str(e).splitlines()[0]
    try:
        run_one(m, min(sizes), pp, 4)  # warm
        return [run_one(m, n, pp, tokens).decode_tok_s for n in sizes]
    finally:
        del m


def batch_table(a, devices: list[str], split) -> None:
    sizes = [int(n) for n in a.batch.split(",")]
    runs = [("one device", {"device": devices[0]})]
    for n in a.microbatches.split(","):
        runs.append((f"split, {n} micro-batch{'es' if n != '1' else ''}",
                     {"devices": devices, "split": split, "tuning": {"split_microbatches": int(n)}}))
    print(f"| {a.model}: decode tok/s (pp{a.batch_pp}, {a.tokens} tokens) | " +
          " | ".join(f"batch {n}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, kwargs in runs:
        got = batch_rates(a.model, sizes, a.batch_pp, a.tokens, kwargs)
        cells = [f"did not load: {got}"] + [""] * (len(sizes) - 1) if isinstance(got, str) else \
            [f"{r:,.1f}" for r in got]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--devices", required=True, help="comma-separated selectors, in layer order")
    ap.add_argument("--split", help="comma-separated layer counts or proportions")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--batch", help="comma-separated batch sizes: batched decode instead")
    ap.add_argument("--microbatches", default="1,2", help="with --batch: the split's micro-batch counts")
    ap.add_argument("--batch-pp", type=int, default=128, help="with --batch: prompt tokens per sequence")
    a = ap.parse_args()
    devices = a.devices.split(",")
    split = [float(s) if "." in s else int(s) for s in a.split.split(",")] if a.split else None
    if a.batch:
        return batch_table(a, devices, split)
    prompt = np.random.default_rng(0).integers(10, 1000, a.pp).tolist()
    # The floor: every byte of the file read once per token, the parts one after the other, at the
    # first device's copy-kernel rate.
    bandwidth = copy_bandwidth(akunu.Device(devices[0]))
    floor = bandwidth / os.path.getsize(a.model)
    rows = [(name, measure(a.model, prompt, a.tokens, kwargs))
            for name, kwargs in [("one device, chains", {"device": devices[0]}),
                                 ("one device, chain=1", {"device": devices[0], "chain": 1}),
                                 (f"split over {a.devices}", {"devices": devices, "split": split})]]
    print(f"floor: {os.path.getsize(a.model) / 1e9:.1f} GB a token at {bandwidth / 1e12:.2f} TB/s: "
          f"{floor:,.1f} tok/s")
    print(f"| {a.model} | prefill tok/s (pp{a.pp}) | decode tok/s ({a.tokens} tokens) | of floor |")
    print("|---|---|---|---|")
    for name, got in rows:
        if isinstance(got, str):
            print(f"| {name} | did not load: {got} | | |")
        else:
            print(f"| {name} | {got[0]:,.0f} | {got[1]:,.1f} | {got[1] / floor:.0%} |")
    if not isinstance(rows[1][1], str) and not isinstance(rows[2][1], str):
        print(f"split decode step against chain=1: {100 * (rows[1][1][1] / rows[2][1][1] - 1):+.1f} % time")


if __name__ == "__main__":
    main()
