"""score_batch over many sequences against the single-sequence prefill rate: prompt tokens per
second of `--sequences` random token lists of `--tokens` ids scored together
(Model.score_batch), beside score() of one such list and eval() of one (pp), medians of --runs
after a warm-up. The warm-up call makes the batch the model keeps for later calls
(akunu.batch.KeptBatches), so the runs time calls in a kept batch; a call's first batch costs
what bench/NOTES.md's "Scoring batches kept between calls" measured. The scored tokens are every
id but the first of each list. Each --tuning
(akunu tuning settings, docs/configuration.md) loads the model once more with them, so that
variants compare in one run: `--tuning batch_flash=0 batch_flash=1` times the batched step's
attention row by row against its query tiles.

    python bench/score_batch.py MODEL.gguf [--sequences 64] [--tokens 512] [--device vulkan] [--rows 0,256]
        [--kv-dtype f16] [--tuning SETTINGS [SETTINGS ...]]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import akunu


def rate(f, tokens: int, runs: int) -> float:
    f()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return tokens / statistics.median(times)


def variant(a: argparse.Namespace, seqs: list, tuning: str, baselines: bool) -> None:
    """The rows of one tuning: with `baselines`, eval (pp) and score() of one sequence first."""
    m = akunu.Model(a.model, context=a.tokens + 16, device=a.device, progress=False, tuning=tuning or None,
                    kv_dtype=a.kv_dtype)
    name = tuning or "default"
    if baselines:
        print(f"| {name} | eval (pp{a.tokens}) on {m.device.name} | "
              f"{rate(lambda: m.eval(seqs[0][:a.tokens]), a.tokens, a.runs):,.0f} |")
        print(f"| {name} | score, one sequence | {rate(lambda: m.score(seqs[0]), a.tokens, a.runs):,.0f} |")
    for rows in (int(r) for r in a.rows.split(",")):
        got = rate(lambda rows=rows: m.score_batch(seqs, max_sequences=a.sequences, rows=rows),
                   a.sequences * a.tokens, a.runs)
        print(f"| {name} | score_batch, rows {rows or 'default'} | {got:,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--device", default=None)
    ap.add_argument("--kv-dtype", default="f16", help="the KV cache's format (akunu.Model kv_dtype)")
    ap.add_argument("--rows", default="0", help="comma-separated rows per batched step (0: score_batch's default)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tuning", nargs="+", default=[""],
                    help="tuning settings per variant, e.g. batch_flash=0 batch_flash=1 ('' for none)")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    seqs = [rng.integers(10, 1000, a.tokens + 1).tolist() for _ in range(a.sequences)]
    print(f"{a.sequences} sequences of {a.tokens} scored tokens")
    print("| tuning | path | tok/s |\n|---|---|---|")
    for i, tuning in enumerate(a.tuning):
        variant(a, seqs, tuning, i == 0)


if __name__ == "__main__":
    main()
