"""Speculative decoding: a small draft model proposes draft_tokens tokens, and the target model
checks them all in one multi-row step (the prefill table with every row's logits).

    m.generate(ids, draft=small, draft_tokens=4, stream=False)   # Generation.acceptance_rate

Each round starts from a pending token x (sampled, not yet in either cache). The draft feeds x
and proposes y1 .. yK one step at a time; the target runs [x, y1, .., yK] in one step, whose K + 1
rows of logits judge y1 .. yK and give the token after the last one accepted:

- greedy: y_i is accepted while it is the target's argmax; the first miss is replaced by the
  target's argmax, and if all K are accepted the last row gives one more token. The tokens are
  those of plain greedy decoding (up to near-ties, which the multi-row step's GEMM rounding may
  order differently from a decode step's GEMV).
- sampling (temperature > 0): y_i is accepted with probability min(1, p(y_i) / q(y_i)), with p and
  q the target's and draft's distributions after the Sampler's filters (temperature, then top_k,
  top_p and min_p, as the device sampler applies them: filtered_probs); the draft proposes from
  q, and a rejected y_i is replaced by a draw from max(0, p - q) normalised. So every token is
  drawn from the target's filtered distribution exactly, as plain sampling draws it (Leviathan
  et al., 2023; tests/python/test_batch_speculative.py checks it by a chi-square test). Draws
  come from a NumPy generator seeded by Sampler.seed, so they are not the device sampler's draws.

Both caches are then rewound to the accepted tokens (Model truncate), and the draft catches up
with any token it did not run.
"""
from __future__ import annotations

import time

import numpy as np

from akunu import _akunu
from akunu.sampling import Generation, Sampler


def filtered_probs(logits: np.ndarray, sampler: Sampler) -> np.ndarray:
    """The distribution the device sampler draws from (shaders/sample.comp), float64 [vocab]:
    logits / temperature, then top_k, top_p and min_p, each keeping the ties at its threshold."""
    z = logits.astype(np.float64) / sampler.temperature
    keep = np.ones(z.shape, bool)
    if 0 < sampler.top_k < z.size:
        keep &= z >= np.partition(z, z.size - sampler.top_k)[z.size - sampler.top_k]
    if sampler.top_p < 1.0:
        w = np.exp(z - z.max()) * keep
        order = np.argsort(-z, kind="stable")
        values, mass = z[order], np.cumsum(w[order])
        last_tie = np.searchsorted(-values, -values, side="right") - 1  # mass of z >= v counts v's ties
        first = int(np.argmax(mass[last_tie] >= sampler.top_p * mass[-1] * (1 - 1e-6)))
        keep &= z >= values[first]
    if sampler.min_p > 0.0:
        keep &= z >= z.max() + np.log(sampler.min_p)
    p = np.exp(z - z.max()) * keep
    return p / p.sum()


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max()
    return z - np.log(np.exp(z).sum())


def _judge(rows: np.ndarray, proposals: list[int], draft_dists: list, sampler: Sampler, rng) -> tuple[int, int]:
    """(accepted count, the token after them) for target rows [K + 1, vocab]."""
    for i, y in enumerate(proposals):
        if sampler.greedy:
            best = int(np.argmax(rows[i]))
            if best != y:
                return i, best
            continue
        p, q = filtered_probs(rows[i], sampler), draft_dists[i]
        if rng.random() < min(1.0, p[y] / max(q[y], 1e-30)):
            continue
        residual = np.maximum(p - q, 0.0)
        total = residual.sum()
        return i, int(rng.choice(len(p), p=residual / total)) if total > 0 else int(rng.choice(len(p), p=p))
    last = rows[len(proposals)]
    return len(proposals), int(np.argmax(last)) if sampler.greedy else int(
        rng.choice(len(last), p=filtered_probs(last, sampler)))


def generate(model, draft, ids: list[int], draft_tokens: int, max_tokens: int, sampler: Sampler | None,
             stop_ids=None) -> Generation:
    """The Generation of speculative decoding with `draft`; its acceptance_rate is the share of
    proposed tokens the target accepted. Both models' caches are reset first."""
    if draft.config.vocab_size != model.config.vocab_size:
        raise ValueError(f"draft: its vocabulary has {draft.config.vocab_size} tokens, the target's "
                         f"{model.config.vocab_size}; a draft must share the target's tokenizer")
    if not (isinstance(draft_tokens, int) and 1 <= draft_tokens <= 64):
        raise ValueError(f"draft_tokens must be an int in [1, 64], got {draft_tokens!r}")
    sampler = sampler or Sampler()
    stop_ids = set(model.tokenizer.stop_ids if stop_ids is None else stop_ids)
    rng = np.random.default_rng(sampler.seed)
    result = Generation(text="", prompt_tokens=len(ids))
    start = time.perf_counter()
    for m in (model, draft):
        m.reset()
        if len(ids) > 1:
            m.eval(ids[:-1], reset=False)
    pending, proposed, accepted = ids[-1], 0, 0
    result.stop_reason = "max_tokens"
    while len(result.token_ids) < max_tokens:
        held = model.kv_cache.current_length
        k = min(draft_tokens, model.context - held - 1)
        if k < 1:
            result.stop_reason = "context"
            break
        proposals, dists, token = [], [], pending
        for _ in range(k):  # the draft, one step at a time
            logits = np.array(draft.eval([token], reset=False), dtype=np.float32)
            dists.append(None if sampler.greedy else filtered_probs(logits, sampler))
            token = int(np.argmax(logits)) if sampler.greedy else int(rng.choice(len(logits), p=dists[-1]))
            proposals.append(token)
        rows = model.eval([pending] + proposals, all_logits=True, reset=False)  # one multi-row step
        n, after = _judge(rows, proposals, dists, sampler, rng)
        proposed, accepted = proposed + k, accepted + n
        model.kv_cache.truncate(held + 1 + n)
        draft.kv_cache.truncate(min(draft.kv_cache.current_length, held + 1 + n))
        if draft.kv_cache.current_length < held + 1 + n:  # all accepted: the draft never ran y_K
            draft.eval(proposals[n - 1:n], reset=False)
        for t, row in zip(proposals[:n] + [after], rows[: n + 1]):
            if t in stop_ids:
                result.stop_reason = "stop_token"
                break
            result.token_ids.append(t)
            result.logprobs.append(float(_log_softmax(row)[t]))
            if len(result.token_ids) >= max_tokens:
                break
        if result.stop_reason == "stop_token":
            break
        if not result.time_to_first_token:
            result.time_to_first_token = time.perf_counter() - start
        pending = after
    result.decode_seconds = time.perf_counter() - start - result.time_to_first_token
    if any(np.isnan(result.logprobs)):
        raise _akunu.Error("speculative decoding: the target produced NaN logits")
    result.text = model.detokenize(result.token_ids, skip_special_tokens=True)
    result.acceptance_rate = accepted / proposed if proposed else 0.0
    return result
