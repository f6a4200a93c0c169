"""make_random_gguf.py's files at disk speed, for models too large for its per-byte random draws
(a 70B q8_0 file takes it most of an hour): every 2-D tensor is cut from one pool of random
blocks per type, drawn as make_random_gguf.py draws them (finite, small, valid scales), starting
at a different offset for each tensor. Metadata, names, shapes and layout are make_random_gguf.py's
own: this script runs its main() with the tensor writer swapped. For timing only, like the
original.

    python bench/tiled_random_gguf.py --shape llama3-70b-v32k --type q8_0 -o /tmp/70b-q8_0.gguf

make_random_gguf.py is found through $AKUNU_MAKE_RANDOM_GGUF, else ../shared/tools or
.shared/tools beside the checkout.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
POOL_BYTES = 64 << 20


def generator_path() -> pathlib.Path:
    for p in (os.environ.get("AKUNU_MAKE_RANDOM_GGUF"), ROOT.parent / "shared/tools/make_random_gguf.py",
              ROOT / ".shared/tools/make_random_gguf.py"):
        if p and pathlib.Path(p).is_file():
            return pathlib.Path(p)
    sys.exit("make_random_gguf.py not found: set AKUNU_MAKE_RANDOM_GGUF to its path")


def tiled_writer(original):
    """random_tensor(rng, shape, tname) with the same bytes per block as `original`, cut from a
    pool drawn once per type."""
    pools: dict[str, np.ndarray] = {}
    calls = [0]

    def random_tensor(rng, shape, tname):
        _, blk, bsz = original.__globals__["TYPES"][tname]
        if tname not in pools:
            blocks = max(1, POOL_BYTES // bsz)
            pools[tname] = np.frombuffer(original(rng, (blk * blocks,), tname), np.uint8)
        pool = pools[tname]
        want = int(np.prod(shape)) // blk * bsz
        calls[0] += 1
        start = (calls[0] * 7919 * bsz) % len(pool)  # whole blocks, a different one first each time
        reps = -(-(want + start) // len(pool))
        return np.tile(pool, reps)[start:start + want].tobytes()

    return random_tensor


def main() -> int:
    spec = importlib.util.spec_from_file_location("make_random_gguf", generator_path())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.random_tensor = tiled_writer(mod.random_tensor)
    return mod.main()


if __name__ == "__main__":
    sys.exit(main())
