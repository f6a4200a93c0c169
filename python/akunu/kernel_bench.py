"""Kernel benchmarks: device copy bandwidth, and GEMV bandwidth as a fraction of it.

Decode at batch 1 streams every weight once per token, so a GEMV's achieved bandwidth over the
device's copy bandwidth is the fraction of the memory-bandwidth floor that kernel reaches.
Times come from GPU timestamps around many back-to-back dispatches in one submission.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from akunu._akunu import CommandList, kernels


@dataclass
class BenchRow:
    name: str
    bytes_moved: int  # per repetition: bytes read + bytes written
    ms: float         # per repetition, median of the trials
    flops: float = 0.0  # per repetition, for compute-bound kernels (GEMM)

    @property
    def gb_per_s(self) -> float:
        return self.bytes_moved / (self.ms * 1e-3) / 1e9


def _time(device, record, reps: int, trials: int = 5) -> float:
    """Median over `trials` of the per-repetition GPU time of `record(cl)` repeated `reps` times."""
    cl = CommandList(device)
    cl.begin()
    t0 = cl.timestamp()
    for _ in range(reps):
        record(cl)
    t1 = cl.timestamp()
    cl.end()
    times = []
    for _ in range(trials + 1):  # the first run warms caches and clocks
        cl.submit()
        cl.wait()
        times.append(cl.elapsed_ms(t0, t1) / reps)
    return float(np.median(times[1:]))


def run(device, scale: float = 1.0) -> list[BenchRow]:
    """`scale` shrinks the problems for slow devices (lavapipe). The first row, a copy kernel over
    1 GiB, is the bandwidth every other row is compared with."""
    rows_out = []
    copy_bytes = int((1 << 30) * scale) // 256 * 256
    a, b = device.allocate(copy_bytes), device.allocate(copy_bytes)
    ms = _time(device, lambda cl: kernels.copy(cl, a, b, copy_bytes), reps=10)
    rows_out.append(BenchRow(f"copy kernel {copy_bytes >> 20} MiB", 2 * copy_bytes, ms))
    ms = _time(device, lambda cl: cl.copy(a, 0, b, 0, copy_bytes), reps=10)
    rows_out.append(BenchRow(f"vkCmdCopyBuffer {copy_bytes >> 20} MiB", 2 * copy_bytes, ms))
    del a, b

    rng = np.random.default_rng(0)
    # Enough distinct weight matrices that their sum is well past any last-level cache (the
    # H200's L2 is 60 MB), cycled so each dispatch streams from memory as decode does.
    stream_bytes = int((512 << 20) * scale)
    # Llama-7B/8B projection shapes: attention (4096x4096) and FFN up/down.
    for wtype, rows, k in ((np.float16, 4096, 4096), (np.float16, 14336, 4096), (np.float16, 4096, 14336),
                           (np.float32, 4096, 4096)):
        rows = max(4, int(rows * min(1.0, scale * 4)))
        w0 = rng.standard_normal((rows, k)).astype(wtype)
        ws = [device.upload(w0) for _ in range(max(1, -(-stream_bytes // w0.nbytes)))]
        x = device.upload(rng.standard_normal(k).astype(np.float32))
        ys = [device.empty([rows], "f32") for _ in ws]  # distinct outputs: no barrier between GEMVs
        turn = iter(range(1 << 30))

        def record(cl):
            i = next(turn) % len(ws)
            kernels.gemv(cl, ws[i], ws[i].dtype, x, ys[i], rows, k)

        ms = _time(device, record, reps=10 * len(ws))
        rows_out.append(BenchRow(f"gemv {ws[0].dtype} {rows}x{k}", w0.nbytes + x.size + 4 * rows, ms))
        del ws, ys

    # Prefill GEMMs: a 512-token chunk through a 4096 x 4096 projection, f16 and Q4_0 weights.
    shrink = min(1.0, scale * 4)
    m, n, k = max(16, int(512 * shrink)), max(64, int(4096 * shrink)), max(64, int(4096 * shrink))
    x = device.upload(rng.standard_normal((m, k)).astype(np.float32))
    y = device.empty([m, n], "f32")
    step = device.upload(np.array([0, 0, m, 0], np.uint32))
    q4 = rng.integers(0, 256, (n * k // 32, 18), dtype=np.uint8)
    q4[:, :2] = np.full(q4.shape[0], 0.01, np.float16).view(np.uint8).reshape(-1, 2)
    for wtype, w in (("F16", device.upload(rng.standard_normal((n, k)).astype(np.float16))),
                     ("Q4_0", device.upload(q4.reshape(-1)))):
        ms = _time(device, lambda cl: kernels.gemm(cl, w, wtype, x, y, m, n, k, step), reps=5)
        rows_out.append(BenchRow(f"gemm {wtype} {m}x{n}x{k}", w.size + x.size + y.size, ms, flops=2.0 * m * n * k))
    return rows_out


def format_table(rows: list[BenchRow]) -> str:
    copy = rows[0].gb_per_s
    lines = [f"{'kernel':<26}{'MB moved':>10}{'us':>10}{'GB/s':>10}{'of copy':>9}{'TFLOP/s':>9}"]
    for r in rows:
        tflops = f"{r.flops / (r.ms * 1e-3) / 1e12:>9.1f}" if r.flops else ""
        lines.append(f"{r.name:<26}{r.bytes_moved / 1e6:>10.1f}{r.ms * 1e3:>10.1f}{r.gb_per_s:>10.1f}"
                     f"{r.gb_per_s / copy:>9.0%}{tflops}")
    return "\n".join(lines)
