"""Profiles and kernel statistics as text tables (akunu profile, akunu.profile_table)."""

from __future__ import annotations

import re

import numpy as np


def median_profile(sample, runs: int) -> list[dict]:
    """`runs` profiles from sample() (each a list of rows in the same command order), as one:
    each command's ms is its median over the runs, which steadies single readings of
    microsecond kernels."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    samples = [sample() for _ in range(runs)]
    rows = samples[0]
    for i, row in enumerate(rows):
        row["ms"] = float(np.median([s[i]["ms"] for s in samples]))
    return rows


def profile_table(rows: list[dict], by: str = "kernel") -> str:
    """Model.profile() rows summed by kernel class (by="kernel": the kernel name without its
    type suffix) or by step of a layer (by="label": the label without its "blk.N." prefix, so
    attn_q sums the Q projections of every layer): calls, GPU time, share of the total, and the
    bytes bound to those commands per second (an upper bound on what they moved: a GEMV reads
    all of its weights, a GEMM rereads them)."""
    if by not in ("kernel", "label"):
        raise ValueError(f"profile_table: by must be 'kernel' or 'label', got {by!r}")
    classes: dict[str, list[float]] = {}
    for r in rows:
        name = r["kernel"].split("_")[0] if by == "kernel" else re.sub(r"^blk\.\d+\.", "", r["label"])
        c = classes.setdefault(name, [0, 0.0, 0])
        c[0] += 1
        c[1] += r["ms"]
        c[2] += r["bytes_bound"]
    total = sum(c[1] for c in classes.values()) or float("nan")
    lines = [f"{by:<18}{'calls':>6}{'ms':>10}{'share':>8}{'GB/s bound':>12}"]
    for name, (calls, ms, nbytes) in sorted(classes.items(), key=lambda kv: -kv[1][1]):
        gbs = nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")
        lines.append(f"{name:<18}{calls:>6}{ms:>10.3f}{ms / total:>8.1%}{gbs:>12.0f}")
    lines.append(f"{'total':<18}{len(rows):>6}{total:>10.3f}")
    return "\n".join(lines)


def kernel_statistics_table(stats: list[dict], kernels=None) -> str:
    """Model.kernel_statistics() (or Device.kernel_statistics()) as text, one line per kernel
    and specialization (the workgroup size first), only those named in `kernels` if given."""
    lines = []
    for s in sorted(stats, key=lambda s: (s["kernel"], s["spec"])):
        if kernels is not None and s["kernel"] not in kernels:
            continue
        values = ", ".join(f"{name} {value:g}" for name, value in s["statistics"].items())
        spec = ":".join(str(v) for v in s["spec"])
        lines.append(f"{s['kernel']}[{spec}]  {values}")
    return "\n".join(lines)
