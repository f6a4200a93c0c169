"""Time to first token by prompt length: what a short prompt costs against a whole chunk.

    python bench/prompt_lengths.py FILE [--lengths 1 2 8 64 65 512] [--runs 3] [--device cpu]
        [--tuning SETTINGS [SETTINGS ...]]

Each cell is the median of --runs prefills after a warmup, from an empty cache: random ids,
eval, then the sampled token read (as `python -m akunu bench`'s TTFT). Also prints the load
time. A recorded chunk table serves every length; this shows how its cost follows the length.
Each --tuning (akunu tuning settings, docs/configuration.md; "" is the default) loads the model
once more with them, so that variants compare in one process: a column each, and the largest
difference of each variant's logits from the first's at every length.
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
    ap.add_argument("--tuning", nargs="+", default=[""])
    args = ap.parse_args()
    models = {}
    for tuning in args.tuning:
        t0 = time.perf_counter()
        models[tuning] = akunu.Model(args.file, context=max(args.lengths) + 1, device=args.device, progress=False,
                                     tuning=tuning or None)
        print(f"{args.file} [{tuning or 'default'}]: loaded in {time.perf_counter() - t0:.2f} s on "
              f"{models[tuning].device.name}", flush=True)
    first = next(iter(models.values()))
    rng = np.random.default_rng(0)

    def ttft(m: akunu.Model, ids: list[int]) -> float:
        e = m._engine
        e.reset()
        t = time.perf_counter()
        e.eval(ids)
        e.sampled_token()
        return time.perf_counter() - t

    names = [t or "default" for t in args.tuning]
    print(f"{'tokens':>8} " + " ".join(f"{n + ' ms':>24} {'ms/token':>9}" for n in names)
          + (f" {'max |d logit|':>14}" if len(models) > 1 else ""))
    for n in args.lengths:
        ids = rng.integers(0, first.config.vocab_size, n).tolist()
        cells, logits = [], []
        for m in models.values():
            ttft(m, ids)  # warmup
            ms = statistics.median(ttft(m, ids) for _ in range(args.runs)) * 1e3
            cells.append(f"{ms:>24.2f} {ms / n:>9.3f}")
            logits.append(m.eval(ids))
        diff = max((float(np.abs(lg - logits[0]).max()) for lg in logits[1:]), default=None)
        print(f"{n:>8} " + " ".join(cells) + (f" {diff:>14.3g}" if diff is not None else ""), flush=True)


if __name__ == "__main__":
    main()
