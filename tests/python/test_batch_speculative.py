"""Speculative decoding (akunu.speculative): greedy output equals plain greedy decoding token for
token on every architecture fixture, with a draft that is the same model (every proposal
accepted) and with a different draft (the target loaded again with a 4-bit KV cache, with and
without a recent window: some proposals rejected, the output unchanged); sampling keeps the
target's distribution (a rejection scheme), checked here as determinism per seed, the acceptance
rate of a same-model draft, and a chi-square test of the first token against the target's
filtered distribution."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")

ARCHS = {
    "llama": ("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"),
    "gemma3": ("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf"),
    "qwen3": ("tiny-qwen3-random", "gguf", "tiny-qwen3-random-f16.gguf"),
}


def load(arch, **kw):
    return akunu.Model(require(*ARCHS[arch]), context=300, progress=False, **kw)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_speculative_greedy_equals_plain_greedy(arch):
    m = load(arch)
    ids = [int(x) for x in np.random.default_rng(1).integers(3, m.config.vocab_size, size=12)]
    want = m.generate(ids, max_tokens=20, stream=False).token_ids
    same = m.generate(ids, max_tokens=20, stream=False, draft=load(arch), draft_tokens=4)
    assert same.token_ids == want
    assert same.acceptance_rate == 1.0
    # Drafts with a quantized cache, one with a recent window (its rings rewound after each
    # rejection): proposals differ, the output does not.
    for kv_dtype in ("int4", "int4h+w4"):
        other = m.generate(ids, max_tokens=20, stream=False, draft=load(arch, kv_dtype=kv_dtype), draft_tokens=3)
        assert other.token_ids == want, kv_dtype
        assert 0.0 <= other.acceptance_rate <= 1.0


def test_speculative_sampling_is_seeded():
    m, d = load("llama"), load("llama")
    ids = [5, 9, 200, 31]
    s = akunu.Sampler(temperature=0.8, seed=7)
    a = m.generate(ids, max_tokens=12, sampler=s, stream=False, draft=d, draft_tokens=4)
    b = m.generate(ids, max_tokens=12, sampler=s, stream=False, draft=d, draft_tokens=4)
    assert a.token_ids == b.token_ids and len(a.token_ids) == 12
    assert a.acceptance_rate > 0.5  # the draft is the target: p == q, every proposal accepted
    with pytest.raises(ValueError, match="draft_tokens"):
        m.generate(ids, stream=False, draft=d, draft_tokens=0)
    with pytest.raises(ValueError, match="stream=False"):
        m.generate(ids, draft=d)


class BiasedDraft:
    """A draft whose logits are another model's plus a fixed bias, so that its filtered
    distribution overlaps the target's only in part: some proposals are accepted, some rejected,
    and some lie outside the target's filtered set."""

    def __init__(self, model, bias):
        self.model, self.bias = model, bias
        self.config, self.kv_cache = model.config, model.kv_cache

    def reset(self):
        self.model.reset()

    def eval(self, ids, reset=True):
        return np.asarray(self.model.eval(ids, reset=reset), dtype=np.float32) + self.bias


def test_speculative_sampling_keeps_the_targets_filtered_distribution(backend):
    """The first token of speculative sampling over many seeds follows the target's filtered
    distribution (temperature, top_k, top_p, min_p) at the prompt's end: no filtered-out token is
    drawn, and a chi-square test over the kept ones passes at p = 0.001. Rejection is exercised:
    the draft's distribution differs from the target's. The scheme is NumPy on the logits the
    backend gives, so lavapipe (slow per submission) runs fewer draws."""
    from dataclasses import replace

    from akunu.speculative import filtered_probs
    from test_sampling import chi_square_critical

    m = load("llama")
    bias = np.random.default_rng(3).normal(scale=1.5, size=m.config.vocab_size).astype(np.float32)
    draft = BiasedDraft(load("llama"), bias)
    ids = [5, 9, 200, 31]
    sampler = akunu.Sampler(temperature=1.3, top_k=12, top_p=0.9, min_p=0.02)
    m.eval(ids[:-1])  # the target's row as speculative decoding computes it: a multi-row step after ids[:-1]
    row = np.array(m.eval([ids[-1], 1, 2], all_logits=True, reset=False)[0])
    want = filtered_probs(row, sampler)
    proposal = filtered_probs(row + bias, sampler)
    overlap = np.minimum(want, proposal).sum()
    assert 0.1 < overlap < 0.9, overlap  # the draft is right only some of the time
    draws, counts, rates = 2000 if backend == "cpu" else 400, np.zeros(m.config.vocab_size), []
    for seed in range(draws):
        g = m.generate(ids, max_tokens=1, sampler=replace(sampler, seed=seed), stream=False, draft=draft,
                       draft_tokens=2)
        counts[g.token_ids[0]] += 1
        rates.append(g.acceptance_rate)
    assert 0.0 < np.mean(rates) < 1.0
    assert counts[want == 0].sum() == 0, "tokens outside the target's filtered distribution were drawn"
    live = want > 0
    expected = want[live] * draws
    chi2 = ((counts[live] - expected) ** 2 / expected).sum()
    assert chi2 < chi_square_critical(live.sum() - 1), f"chi2 {chi2:.1f}: {counts[live]} vs {np.round(expected)}"
