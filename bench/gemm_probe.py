"""Prefill GEMM probe: TFLOP/s of the cooperative-matrix GEMM on prefill shapes, per variant.

    python bench/gemm_probe.py [VARIANT ...]

A variant is an AKUNU_GEMM_CM value ("name:BM:BN[:knock]", "-" for the default kernel with
knock-out bits, see shaders/gemm_cm.comp), "cm2=features:tokens:k:unroll[:invocations]" for a
tile of gemm_cm2_f16 (AKUNU_GEMM_CM2, X as halves), or "default". Each runs in its own process,
so that the environment picks the kernel; every shape repeats enough GEMMs for ~50 ms of GPU
time on the same W, which stays in the L2 cache: in a model's chunk W streams from memory, and
`python bench/decode_variants.py FILE --prefill` measures tiles there.
AKUNU_GEMM_PROBE_X=f16 gives the GEMMs X as halves, as a prefill chunk's norms and activation
write it (kernels::gemm_takes_half_x); the default is f32. With halves, f16 weights run
gemm_cm2_f16 where the device and build have it (AKUNU_NO_CM2=1: gemm_cm_f16).
"""
from __future__ import annotations

import os
import subprocess
import sys

SHAPES = [(512, 4096, 4096), (512, 12288, 4096), (512, 4096, 11008), (512, 2048, 2048), (512, 16384, 2048)]


def measure() -> None:
    import numpy as np

    import akunu
    from akunu._akunu import kernels
    from akunu.kernel_bench import _time, random_blocks

    device = akunu.Device()
    rng = np.random.default_rng(0)
    x_type = np.float16 if os.environ.get("AKUNU_GEMM_PROBE_X") == "f16" else np.float32
    cells = []
    for m, n, k in SHAPES:
        x = device.upload(rng.standard_normal((m, k)).astype(x_type))
        y = device.empty([m, n], "f32")
        step = device.upload(np.array([0, 0, m, 0], np.uint32))
        w = device.upload((0.05 * rng.standard_normal((n, k))).astype(np.float16))
        reps = max(5, int(50e-3 / (2.0 * m * n * k / 100e12)))
        ms = _time(device, lambda cl: kernels.gemm(cl, w, "F16", x, y, m, n, k, step), reps=reps, trials=3)
        cells.append(f"{2.0 * m * n * k / (ms * 1e-3) / 1e12:6.1f}")
    # Block formats on the 4096 x 4096 shape, where the default kernels run (variants are f16).
    variant = os.environ.get("AKUNU_GEMM_CM", "-")
    for wtype in ("Q8_0", "Q4_0") if variant.startswith("-") and "AKUNU_GEMM_CM2" not in os.environ else ():
        m, n, k = SHAPES[0]
        x = device.upload(rng.standard_normal((m, k)).astype(x_type))
        y = device.empty([m, n], "f32")
        step = device.upload(np.array([0, 0, m, 0], np.uint32))
        w = device.upload(random_blocks(rng, wtype, n * k))
        ms = _time(device, lambda cl: kernels.gemm(cl, w, wtype, x, y, m, n, k, step), reps=100, trials=3)
        cells.append(f"{wtype} {2.0 * m * n * k / (ms * 1e-3) / 1e12:6.1f}")
    print(" | ".join(cells), end="", flush=True)
    # Correctness on odd sizes (a probe of a broken variant says so): rows, columns and k that
    # are no multiple of any tile.
    m, n, k = 333, 1000, 1032
    xs = rng.standard_normal((m, k)).astype(x_type)
    ws = (0.05 * rng.standard_normal((n, k))).astype(np.float16)
    y = device.empty([m, n], "f32")
    step = device.upload(np.array([0, 0, m, 0], np.uint32))
    wd, xd = device.upload(ws), device.upload(xs)
    _time(device, lambda cl: kernels.gemm(cl, wd, "F16", xd, y, m, n, k, step), reps=1, trials=1)
    want = xs.astype(np.float16).astype(np.float64) @ ws.astype(np.float64).T
    err = np.abs(y.numpy() - want).max() / np.abs(want).max()
    print(f" | max err {err:.1e}" + ("" if err < 1e-3 else "  WRONG"), flush=True)


def main() -> None:
    if os.environ.get("AKUNU_GEMM_PROBE_CHILD"):
        measure()
        return
    variants = sys.argv[1:] or ["default"]
    print("TFLOP/s per shape (m x n x k): " + " | ".join(f"{m}x{n}x{k}" for m, n, k in SHAPES))
    for v in variants:
        env = dict(os.environ, AKUNU_GEMM_PROBE_CHILD="1")
        if v.startswith("cm2="):
            env.update(AKUNU_GEMM_CM2=v[4:], AKUNU_GEMM_PROBE_X="f16")
        elif v != "default":
            env["AKUNU_GEMM_CM"] = v
        print(f"{v:>16}: ", end="", flush=True)
        r = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True)
        print(r.stdout.strip() if r.returncode == 0 else "FAILED " + r.stderr.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
