"""Times the block-format GEMVs (Q8_0, Q4_0, Q4_1) at the decode shapes of the 1b and 7b models
under several workgroup shapes, chained as decode runs them, and prints one table with a column
per shape: the measurements behind kernels.cpp's gemv_dot_shape.

    python bench/gemv_shapes.py [--int-dot] [SHAPE ...]

A SHAPE is AKUNU_GEMV_SHAPE's "group:sg_rows:chunks" (invocations per workgroup, rows per
subgroup, 16-byte chunks in flight per invocation); "default" is the engine's choice. Each cell
is the faster of two repeats (single kernel-bench numbers on the H200 move by up to 30 %).
"""
import argparse
import os

import akunu
from akunu import kernel_bench

DEFAULT_SHAPES = ["default", "512:1:4", "512:2:2", "512:2:4", "512:4:2", "256:2:4", "1024:2:2"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES)
    ap.add_argument("--int-dot", action="store_true", help="the integer-dot kernel instead of the word GEMV")
    ap.add_argument("--types", default="Q8_0,Q4_0,Q4_1")
    args = ap.parse_args()
    dev = akunu.Device()
    scale = 1.0 if dev.profile["type"] != "cpu" else 1 / 16
    pool = kernel_bench.copy_row(dev, scale)  # warms the device; its GB/s heads the table
    print(f"GEMV shapes on {dev.name}: us per chained dispatch (copy kernel {pool.gb_per_s:,.0f} GB/s)")
    cells: dict[str, dict[str, float]] = {}
    for shape in args.shapes:
        if shape == "default":
            os.environ.pop("AKUNU_GEMV_SHAPE", None)
        else:
            os.environ["AKUNU_GEMV_SHAPE"] = shape
        for _ in range(2):
            rows = kernel_bench.gemv_rows(dev, wtypes=tuple(args.types.split(",")), models=("1b", "7b"),
                                          x_rounding="int8" if args.int_dot else "float", scale=scale)
            for r in rows:
                best = cells.setdefault(r.name, {})
                best[shape] = min(best.get(shape, float("inf")), r.ms * 1e3)
    print(f"{'kernel':<30}" + "".join(f"{s:>11}" for s in args.shapes))
    for name, by_shape in cells.items():
        print(f"{name:<30}" + "".join(f"{by_shape.get(s, float('nan')):>11.1f}" for s in args.shapes))


if __name__ == "__main__":
    main()
