"""Kernel benchmarks: device copy bandwidth, and GEMV bandwidth as a fraction of it.

Decode at batch 1 streams every weight once per token, so a GEMV's achieved bandwidth over the
device's copy bandwidth is the fraction of the memory-bandwidth floor that kernel reaches.
Times come from GPU timestamps around many back-to-back dispatches in one submission.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import numpy as np

from akunu import _akunu, _progress
from akunu._akunu import CommandList, kernels

_bar = _progress.bar(None, "", show=False)  # what measuring() shows: one tick per measurement


@contextlib.contextmanager
def measuring(show: bool | None = None):
    """A bar counting the measurements taken inside the block (`show` as _progress.bar takes it)."""
    global _bar
    _bar = _progress.bar(None, "kernel-bench", "measurement", show)
    try:
        yield
    finally:
        _bar.close()
        _bar = _progress.bar(None, "", show=False)


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
        start = time.perf_counter()
        cl.submit()
        cl.wait()
        wall_ms = (time.perf_counter() - start) * 1e3
        ms = cl.elapsed_ms(t0, t1)
        # Without GPU timestamps (the CPU backend, whose submit runs the work) the wall time is the measure.
        times.append((wall_ms if math.isnan(ms) else ms) / reps)
    _bar.update(1)
    return float(np.median(times[1:]))


# Block formats the benchmark times: (elements, bytes) per block and the byte offsets of its
# f16 scales; the other bytes of a block are valid as random bytes.
_BLOCKS = {"Q8_0": (32, 34, [0]), "Q4_0": (32, 18, [0]), "Q4_1": (32, 20, [0, 2]), "Q4_K": (256, 144, [0, 2]),
           "Q6_K": (256, 210, [208])}


def random_blocks(rng, wtype: str, n: int) -> np.ndarray:
    """n weights of a block format as raw bytes (uint8), with small finite scales."""
    block, nbytes, halves = _BLOCKS[wtype]
    raw = rng.integers(0, 256, (n // block, nbytes), dtype=np.uint8)
    for off in halves:
        raw[:, off:off + 2] = np.full(raw.shape[0], 0.001, np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)


def copy_row(device, scale: float = 1.0, buffers=None) -> BenchRow:
    """The copy kernel over 1 GiB (times `scale`): the bandwidth every other row is compared with."""
    copy_bytes = int((1 << 30) * scale) // 256 * 256
    a, b = buffers or (device.allocate(copy_bytes), device.allocate(copy_bytes))
    ms = _time(device, lambda cl: kernels.copy(cl, a, b, copy_bytes), reps=10)
    return BenchRow(f"copy kernel {copy_bytes >> 20} MiB", 2 * copy_bytes, ms)


def run(device, scale: float = 1.0) -> list[BenchRow]:
    """`scale` shrinks the problems for slow devices (lavapipe). The first row is copy_row()."""
    copy_bytes = int((1 << 30) * scale) // 256 * 256
    a, b = device.allocate(copy_bytes), device.allocate(copy_bytes)
    rows_out = [copy_row(device, scale, (a, b))]
    ms = _time(device, lambda cl: cl.copy(a, 0, b, 0, copy_bytes), reps=10)
    rows_out.append(BenchRow(f"vkCmdCopyBuffer {copy_bytes >> 20} MiB", 2 * copy_bytes, ms))
    a = b = None  # released before the GEMVs allocate

    rng = np.random.default_rng(0)
    # Enough distinct weight matrices that their sum is well past any last-level cache (the
    # H200's L2 is 60 MB), cycled so each dispatch streams from memory as decode does.
    stream_bytes = int((512 << 20) * scale)
    # Llama-7B/8B projection shapes: attention (4096x4096) and FFN up/down, then the block
    # formats on the attention shape.
    for wtype, rows, k in ((np.float16, 4096, 4096), (np.float16, 14336, 4096), (np.float16, 4096, 14336),
                           (np.float32, 4096, 4096), ("Q4_0", 4096, 4096), ("Q4_K", 4096, 4096), ("Q6_K", 4096, 4096)):
        rows = max(4, int(rows * min(1.0, scale * 4)))
        if isinstance(wtype, str):
            w0, name = random_blocks(rng, wtype, rows * k), wtype
        else:
            w0 = rng.standard_normal((rows, k)).astype(wtype)
            name = "f16" if wtype == np.float16 else "f32"
        ws = [device.upload(w0) for _ in range(max(1, -(-stream_bytes // w0.nbytes)))]
        x = device.upload(rng.standard_normal(k).astype(np.float32))
        ys = [device.empty([rows], "f32") for _ in ws]  # distinct outputs: no barrier between GEMVs
        turn = iter(range(1 << 30))

        def record(cl):
            i = next(turn) % len(ws)
            kernels.gemv(cl, ws[i], name, x, ys[i], rows, k, x_rounding=kernels.engine_x_rounding(device))

        ms = _time(device, record, reps=10 * len(ws))
        rows_out.append(BenchRow(f"gemv {name} {rows}x{k}", w0.nbytes + x.size + 4 * rows, ms))
        ws = ys = None  # released before the next shape allocates

    return rows_out + gemm_rows(device, scale)


def gemm_rows(device, scale: float = 1.0) -> list[BenchRow]:
    """Prefill GEMMs: a 512-token chunk through a 4096 x 4096 projection, per weight format."""
    rng = np.random.default_rng(0)
    shrink = min(1.0, scale * 4)
    m, n, k = max(16, int(512 * shrink)), max(64, int(4096 * shrink)), max(64, int(4096 * shrink))
    x = device.upload(rng.standard_normal((m, k)).astype(np.float32))
    y = device.empty([m, n], "f32")
    step = device.upload(np.array([0, 0, m, 0], np.uint32))
    rows_out = []
    for wtype in ("F16", "F32", "Q8_0", "Q4_0", "Q4_1", "Q4_K"):
        if wtype.startswith("F"):
            w = device.upload(rng.standard_normal((n, k)).astype(np.float16 if wtype == "F16" else np.float32))
        else:
            w = device.upload(random_blocks(rng, wtype, n * k))
        # Full size: about 35 ms of GEMMs per trial at 100 TFLOP/s (runs of 5 read 3-4x slower on
        # the H200 than bench/gemm_probe.py's and the prefill profile's on the same kernel).
        reps = 200 if scale >= 1.0 else 5
        ms = _time(device, lambda cl: kernels.gemm(cl, w, wtype, x, y, m, n, k, step), reps=reps)
        rows_out.append(BenchRow(f"gemm {wtype} {m}x{n}x{k}", w.size + x.size + y.size, ms, flops=2.0 * m * n * k))
    return rows_out


# The GEMVs of a decode step: [rows, k] of attention Q/O, K/V, FFN gate/up, FFN down and the
# LM head of make_random_gguf.py's 1b (K/V 512 rows, FFN 8192) and llama2-7b files, and the K/V
# and FFN of a 1.1b llama with 4 KV heads and an FFN of 5632 (TinyLlama).
MODEL_GEMV_SHAPES = {
    "1b": [(2048, 2048), (512, 2048), (8192, 2048), (2048, 8192), (32000, 2048)],
    "1.1b": [(256, 2048), (5632, 2048), (2048, 5632)],
    "7b": [(4096, 4096), (11008, 4096), (4096, 11008), (32000, 4096)],
}


def gemv_rows(device, wtypes=("F16", "Q8_0", "Q4_0", "Q4_1", "Q8_0_T32", "Q4_0_T32"), models=("1b", "1.1b", "7b"),
              chained: bool = True,
              x_rounding: str | None = None, scale: float = 1.0, pool=None) -> list[BenchRow]:
    """GEMV bandwidth at the decode shapes. The matrices lie side by side in a pool of 1 GiB
    (times `scale`) of random bytes, so each dispatch streams its weights from memory as decode
    does (the H200's L2 is 60 MB). chained: every dispatch writes the same y, so each waits for
    the one before, as decode's do (launch and drain included); else they overlap and the rows
    give throughput. x_rounding as in ops.gemv (None: the engine's choice; rows whose kernel
    cannot take "int8" or "int16" are left out). `pool`: a buffer to
    reuse across calls."""
    pool_bytes = int((1 << 30) * scale) // 256 * 256
    if pool is None:
        pool = device.upload(np.random.default_rng(0).integers(0, 256, pool_bytes, dtype=np.uint8))
    traits = {t["name"]: t for t in _akunu.tensor_types()}
    rounding = kernels.engine_x_rounding(device) if x_rounding is None else x_rounding
    out = []
    for model in models:
        for rows, k in MODEL_GEMV_SHAPES[model]:
            rows = max(4, int(rows * min(1.0, scale * 4)))
            x = device.upload(np.random.default_rng(1).standard_normal(k).astype(np.float32))
            for wtype in wtypes:
                if wtype.endswith("_T32"):
                    wtype = kernels.tile_type(device, wtype[:-4])  # Vulkan devices': *_T32V
                t = traits[wtype]
                taken = kernels.gemv_x_rounding(device, wtype, k, rounding) != "float"
                if x_rounding not in (None, "float") and not taken:
                    continue
                nbytes = rows * k // t["block_size"] * t["block_bytes"]
                stride = -(-nbytes // 256) * 256
                count = max(1, min(256, pool.size // stride))
                ys = [device.empty([rows], "f32") for _ in range(1 if chained else min(count, 64))]
                turn = iter(range(1 << 30))

                def record(cl):
                    i = next(turn)
                    kernels.gemv(cl, pool, wtype, x, ys[i % len(ys)], rows, k, x_rounding=rounding,
                                 w_offset=(i % count) * stride)

                ms = _time(device, record, reps=max(20, count))
                path = (rounding if taken else "")
                out.append(BenchRow(f"gemv {wtype} {rows}x{k} {path}".rstrip(), nbytes + 4 * k + 4 * rows, ms))
    return out


# Bytes a decode GEMV reads, from one 16-byte vector (the cost of a dispatch that moves
# nothing) to the fused gate/up of llama2-7b in Q8_0: 1b q4_0 K/V and O, then llama2-7b q4_0 O,
# down and gate/up.
READ_CHAIN_BYTES = (16, 589_824, 2_359_296, 9_437_184, 25_362_432, 50_724_864, 95_813_632)


def read_rows(device, scale: float = 1.0, pool=None) -> list[BenchRow]:
    """The read kernel at decode's GEMV sizes, chained (every dispatch waits for the one before,
    as decode's do: launch and drain included) and overlapping (no barriers between them). The
    reads walk a pool of 1 GiB (times `scale`) so each streams from memory, as decode does.
    Against a GEMV of the same bytes, the chained row is what the access alone would cost."""
    pool_bytes = int((1 << 30) * scale) // 256 * 256
    if pool is None:
        pool = device.upload(np.random.default_rng(0).integers(0, 256, pool_bytes, dtype=np.uint8))
    out = []
    for nbytes in READ_CHAIN_BYTES:
        nbytes = max(16, int(nbytes * min(1.0, scale * 4)) // 16 * 16)
        stride = -(-nbytes // 256) * 256
        count = max(1, min(256, pool.size // stride))
        for chained in (True, False):
            flags = [device.empty([64], "u32") for _ in range(1 if chained else 64)]
            turn = iter(range(1 << 30))

            def record(cl):
                i = next(turn)
                kernels.read(cl, pool, flags[i % len(flags)], nbytes, src_offset=(i % count) * stride)

            ms = _time(device, record, reps=max(20, count))
            size = f"{nbytes / 1e6:.1f} MB" if nbytes >= 100_000 else f"{nbytes} B"
            out.append(BenchRow(f"read {size} {'chained' if chained else 'overlapping'}", nbytes, ms))
    return out


def format_table(rows: list[BenchRow]) -> str:
    copy = rows[0].gb_per_s
    lines = [f"{'kernel':<30}{'MB moved':>10}{'us':>10}{'GB/s':>10}{'of copy':>9}{'TFLOP/s':>9}"]
    for r in rows:
        tflops = f"{r.flops / (r.ms * 1e-3) / 1e12:>9.1f}" if r.flops else ""
        lines.append(f"{r.name:<30}{r.bytes_moved / 1e6:>10.1f}{r.ms * 1e3:>10.1f}{r.gb_per_s:>10.1f}"
                     f"{r.gb_per_s / copy:>9.0%}{tflops}")
    return "\n".join(lines)
