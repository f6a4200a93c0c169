"""Speculative decoding against plain decode: greedy tok/s of the target alone, then of
`generate(draft=..., draft_tokens=K)` with the draft file and with the target as its own draft (a
fork: every proposal accepted, so what is left is the cost of drafting and verifying), each with
its acceptance rate; medians of --runs after a warm-up, on a random prompt of --pp ids.

    python bench/speculative.py TARGET.gguf DRAFT.gguf [--draft-tokens 2,4,8] [--tokens 128]
        [--pp 32] [--runs 3] [--device vulkan]

Random weights of one family (`bench/tiled_random_gguf.py --shape llama2-7b` and `--shape 1b`)
share the vocabulary but not the distributions, so their acceptance is low; the target as its own
draft bounds what a draft that always agrees would give.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np

import akunu


def timed(m: akunu.Model, ids: list[int], tokens: int, runs: int, **kw) -> tuple[float, float | None]:
    """(decode tok/s, acceptance rate): medians of `runs` greedy generations after a warm-up."""
    m.generate(ids, max_tokens=tokens, stream=False, **kw)
    results = [m.generate(ids, max_tokens=tokens, stream=False, **kw) for _ in range(runs)]
    for r in results:
        if len(r.token_ids) != tokens:
            raise ValueError(f"generated {len(r.token_ids)} of {tokens} tokens ({r.stop_reason}): ask fewer")
    rates = [r.decode_tokens_per_second for r in results]
    accepted = [r.acceptance_rate for r in results if r.acceptance_rate is not None]
    return statistics.median(rates), statistics.median(accepted) if accepted else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--draft-tokens", default="2,4,8", help="comma-separated proposals per round")
    ap.add_argument("--tokens", type=int, default=128, help="tokens generated a run")
    ap.add_argument("--pp", type=int, default=32, help="prompt ids")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()
    ks = [int(k) for k in a.draft_tokens.split(",")]
    context = a.pp + a.tokens + max(ks) + 8
    where = {"device": a.device} if a.device else {}
    target = akunu.Model(a.target, context=context, progress=False, **where)
    draft = akunu.Model(a.draft, context=context, progress=False, **where)
    itself = target.fork()
    ids = [int(x) for x in np.random.default_rng(0).integers(3, target.config.vocab_size, a.pp)]
    plain, _ = timed(target, ids, a.tokens, a.runs)
    rows = [("plain decode", "-", plain, None)]
    for k in ks:
        for name, d in ((a.draft.rsplit("/", 1)[-1], draft), ("the target itself", itself)):
            rate, accepted = timed(target, ids, a.tokens, a.runs, draft=d, draft_tokens=k)
            rows.append((f"draft: {name}", str(k), rate, accepted))
    print(f"{target.device}: {a.target.rsplit('/', 1)[-1]}, greedy, {a.tokens} tokens after {a.pp}")
    print("| decode | draft tokens | tok/s | of plain | acceptance |")
    print("|---|---|---|---|---|")
    for name, k, rate, accepted in rows:
        share = "-" if accepted is None else f"{accepted:.0%}"
        print(f"| {name} | {k} | {rate:,.1f} | {rate / plain:.2f}x | {share} |")


if __name__ == "__main__":
    main()
