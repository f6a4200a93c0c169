"""Soak: a long generation and many load/free cycles must leave memory flat.

    python bench/soak.py [--tokens 100000] [--cycles 1000] [--model PATH] [--device cpu]

Two phases, each with a pass/fail line and the numbers behind it:
- generation: `--tokens` tokens in calls that each fill the context (every call starts a fresh
  cache), on one Model. The process RSS and the device allocation after the first tenth of
  the tokens must equal those at the end, within the RSS slack below (the allocator's and
  Python's own noise).
- cycles: `--cycles` loads and frees of the model. The RSS after the first tenth of the cycles
  must equal the RSS at the end within the slack (a device of the CPU backend or lavapipe lives
  in host memory, so what a freed model leaves behind shows there), and every loaded model
  must hold the same device allocation.
Exit status 1 when a phase fails. scripts/test.sh runs it at a reduced size.
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sys
import time

RSS_SLACK_BYTES = 16 << 20  # glibc arenas and Python's free lists move by a few MiB


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def default_model() -> pathlib.Path:
    here = pathlib.Path(__file__).resolve().parent.parent
    return here.parent / "shared/fixtures/tiny-llama3-random/gguf/tiny-llama3-random-q8_0.gguf"


def soak_generation(akunu, path: str, device: str, tokens: int) -> tuple[bool, str]:
    m = akunu.Model(path, device=device, context=512)
    prompt = [1, 2, 3, 4]
    per_call = m.context - len(prompt)
    done, marks = 0, None
    started = time.perf_counter()
    while done < tokens:
        n = min(per_call, tokens - done)
        done += max(1, len(m.generate(prompt, max_tokens=n, stream=False).token_ids))
        if marks is None and done >= tokens // 10:
            gc.collect()
            marks = (rss_bytes(), m.memory_report()["device_allocated"])
    gc.collect()
    rss, device_bytes = rss_bytes(), m.memory_report()["device_allocated"]
    grew = rss - marks[0]
    ok = grew <= RSS_SLACK_BYTES and device_bytes == marks[1]
    seconds = time.perf_counter() - started
    return ok, (f"generation: {done} tokens in {seconds:.1f} s, RSS {marks[0] >> 20} -> {rss >> 20} MiB "
                f"(+{grew / 2**20:.1f}, slack {RSS_SLACK_BYTES >> 20}), device {marks[1]} -> {device_bytes} B")


def soak_cycles(akunu, path: str, device: str, cycles: int) -> tuple[bool, str]:
    allocations, mark = set(), None
    started = time.perf_counter()
    for i in range(cycles):
        m = akunu.Model(path, device=device, context=64)  # each load makes its own device
        m.eval([1, 2, 3])
        allocations.add(m.memory_report()["device_allocated"])
        del m
        gc.collect()
        if i + 1 == max(1, cycles // 10):
            mark = rss_bytes()
    rss = rss_bytes()
    grew = rss - mark
    ok = grew <= RSS_SLACK_BYTES and len(allocations) == 1
    seconds = time.perf_counter() - started
    return ok, (f"cycles: {cycles} load/free in {seconds:.1f} s, RSS {mark >> 20} -> {rss >> 20} MiB "
                f"(+{grew / 2**20:.1f}, slack {RSS_SLACK_BYTES >> 20}), device allocation of a loaded model: "
                f"{sorted(allocations)} B (one value when nothing accumulates)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=100_000)
    p.add_argument("--cycles", type=int, default=1000)
    p.add_argument("--model", default=str(default_model()))
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    import akunu

    failed = 0
    for phase, size in ((soak_generation, a.tokens), (soak_cycles, a.cycles)):
        ok, line = phase(akunu, a.model, a.device, size)
        print(("PASS " if ok else "FAIL ") + line, flush=True)
        failed += not ok
    print("soak: " + ("all phases passed" if not failed else f"{failed} phase(s) failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
