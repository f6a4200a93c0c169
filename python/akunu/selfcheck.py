"""Kernel self-check: runs each foundation kernel on a device against a NumPy reference.

`python -m akunu selfcheck` prints one row per kernel and variant. Inputs have odd sizes and the
outputs are poisoned with NaN first, so an element a kernel fails to write shows up as a failure.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from akunu import ops


@dataclass
class CheckResult:
    kernel: str
    shape: str
    max_error: float
    tolerance: float
    gpu_ms: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.max_error) and self.max_error <= self.tolerance)


def _rel_error(got: np.ndarray, want: np.ndarray) -> float:
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.max(np.abs(got - want) / (np.abs(want) + 1e-3)))


def run(device, seed: int = 0) -> list[CheckResult]:
    rng = np.random.default_rng(seed)
    results = []

    for dtype, tol in ((np.float32, 1e-6), (np.float16, 1e-3)):
        name = np.dtype(dtype).name
        n = 10_007
        out = device.upload(np.full(n, np.nan, dtype))
        ms = ops.fill(out, 0.25)
        results.append(CheckResult(f"fill {name}", f"[{n}]", _rel_error(out.numpy(), np.full(n, 0.25)), 0.0, ms))

        a = rng.standard_normal(n).astype(dtype)
        b = rng.standard_normal(n).astype(dtype)
        ga, gb, gc = device.upload(a), device.upload(b), device.upload(np.full(n, np.nan, dtype))
        ms = ops.add(ga, gb, gc)
        want = (a.astype(np.float32) + b.astype(np.float32)).astype(dtype)
        results.append(CheckResult(f"add {name}", f"[{n}]", _rel_error(gc.numpy(), want), tol, ms))

        rows, dim = 5, 4097
        x = rng.standard_normal((rows, dim)).astype(dtype)
        w = rng.standard_normal(dim).astype(dtype)
        gx, gw, gy = device.upload(x), device.upload(w), device.upload(np.full((rows, dim), np.nan, dtype))
        ms = ops.rmsnorm(gx, gw, gy, eps=1e-5)
        x64 = x.astype(np.float64)
        want = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-5) * w.astype(np.float64)
        results.append(CheckResult(f"rmsnorm {name}", f"[{rows}, {dim}]", _rel_error(gy.numpy(), want), tol * 2, ms))

    for wtype in (np.float16, np.float32):
        rows, k = 1027, 2049
        w = rng.standard_normal((rows, k)).astype(wtype)
        x = rng.standard_normal(k).astype(np.float32)
        gw, gx, gy = device.upload(w), device.upload(x), device.upload(np.full(rows, np.nan, np.float32))
        ms = ops.gemv(gw, gx, gy)
        want = w.astype(np.float64) @ x.astype(np.float64)
        # fp32 accumulation over k terms: error grows like sqrt(k) * eps * |terms|.
        err = float(np.max(np.abs(gy.numpy() - want)) / np.sqrt(k))
        results.append(CheckResult(f"gemv {np.dtype(wtype).name}", f"[{rows}, {k}]", err, 1e-5, ms))
    return results


def format_table(results: list[CheckResult]) -> str:
    lines = [f"{'kernel':<16}{'shape':<16}{'max error':>12}{'tolerance':>12}{'GPU ms':>10}  result"]
    for r in results:
        lines.append(
            f"{r.kernel:<16}{r.shape:<16}{r.max_error:>12.2e}{r.tolerance:>12.1e}{r.gpu_ms:>10.3f}  "
            f"{'ok' if r.passed else 'FAIL'}"
        )
    return "\n".join(lines)
