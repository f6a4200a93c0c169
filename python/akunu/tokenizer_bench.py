"""Tokenizer throughput: encode at least 1 MB of mixed text on one thread, report MB/s and
tokens/s. `python -m akunu tokenizer-bench PATH` (tokenizer.json, model dir or GGUF)."""
from __future__ import annotations

import pathlib
import sysconfig
import time


def corpus(min_bytes: int = 1 << 20) -> str:
    """Python sources from the standard library plus multilingual prose, at least min_bytes."""
    parts, size = [], 0
    prose = ("Ünïcödé, 日本語のテキスト, русский текст, العربية, हिन्दी, emoji 🙂👍🏽 and   spaces\n" * 50)
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        parts += [text, prose]
        size += len(text.encode()) + len(prose.encode())
        if size >= min_bytes:
            break
    return "".join(parts)


def run(tokenizer, text: str | None = None, repeats: int = 3) -> dict:
    text = text or corpus()
    nbytes = len(text.encode())
    times = []
    for _ in range(repeats):  # the first pass starts with an empty word cache
        t0 = time.perf_counter()
        ids = tokenizer.encode(text, add_special_tokens=False)
        times.append(time.perf_counter() - t0)
    best = min(times)
    return {"bytes": nbytes, "tokens": len(ids), "seconds": best, "cold_seconds": times[0],
            "mb_per_s": nbytes / best / 1e6, "cold_mb_per_s": nbytes / times[0] / 1e6, "tokens_per_s": len(ids) / best}
