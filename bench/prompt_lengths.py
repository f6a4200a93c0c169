"""Time to first token by prompt length: what a short prompt costs against a whole chunk.

    python bench/prompt_lengths.py FILE [--lengths 1 2 8 64 65 512] [--runs 3] [--device cpu]

Each cell is the median of --runs prefills after a warmup, from an empty cache: random ids,
eval, then the sampled token read (as `python -m akunu bench`'s TTFT). Also prints the load
time. A recorded chunk table serves every length; this shows how its cost follows the length.
"""
import argparse
import statistics
import time

import numpy as np

import akunu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1, 2, 8, 64, 65, 512])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    m = akunu.Model(args.file, context=max(args.lengths) + 1, device=args.device, progress=False)
    print(f"{args.file}: loaded in {time.perf_counter() - t0:.2f} s on {m._engine.device_name}", flush=True)
    e, rng = m._engine, np.random.default_rng(0)

    def ttft(n: int) -> float:
        ids = rng.integers(0, m.config.vocab_size, n).tolist()
        e.reset()
        t = time.perf_counter()
        e.eval(ids)
        e.sampled_token()
        return time.perf_counter() - t

    print(f"{'tokens':>8} {'ms':>10} {'ms/token':>10}")
    for n in args.lengths:
        ttft(n)  # warmup
        ms = statistics.median(ttft(n) for _ in range(args.runs)) * 1e3
        print(f"{n:>8} {ms:>10.1f} {ms / n:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
