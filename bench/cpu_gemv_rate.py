"""The CPU backend's tile GEMV alone, by weight type and matrix size: the rate it reads the
weights at, from L2 (small matrices) out to memory (a 262,144-row head, Gemma 3's vocabulary).

    AKUNU_THREADS=1 python bench/cpu_gemv_rate.py [--types Q8_0,Q5_0,Q4_0,Q4_1] [--k 640]
                                                  [--rows 2048,16384,65536,262144]

Random blocks (the tests' generator), packed into the CPU backend's tiles, x random; each size
runs ops.gemv repeatedly and reports the median time (the host clock between the dispatch's
timestamps) and the weight bytes over it.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))

import akunu  # noqa: E402
from akunu import _akunu, ops  # noqa: E402
from support.kernel_cases import random_weight_blocks  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="Q8_0,Q5_0,Q4_0,Q4_1")
    ap.add_argument("--k", type=int, default=640)
    ap.add_argument("--rows", default="2048,16384,65536,262144")
    args = ap.parse_args()
    dev = akunu.Device("cpu")
    rng = np.random.default_rng(0)
    print(dev.profile["name"])
    for wtype in args.types.split(","):
        for rows in (int(r) for r in args.rows.split(",")):
            unique = min(rows, 8192)  # random blocks for 8,192 rows, repeated past that
            raw, _ = random_weight_blocks(rng, wtype, unique, args.k)
            raw = np.tile(raw.reshape(unique, -1), (rows // unique, 1))
            tiled = wtype + "_T32"
            w = dev.upload(_akunu.pack_tiles(raw.reshape(-1), tiled, rows, args.k))
            x = dev.upload(rng.standard_normal(args.k).astype(np.float32))
            y = dev.upload(np.zeros(rows, np.float32))
            ms = float(np.median([ops.gemv(w, x, y, wtype=tiled) for _ in range(30 if rows < 10000 else 8)]))
            print(f"{wtype:5s} {rows:7d} x {args.k}: {ms:8.3f} ms  {raw.nbytes / ms / 1e6:6.1f} GB/s")


if __name__ == "__main__":
    main()
