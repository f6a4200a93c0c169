"""Speculative decoding (akunu.speculative): greedy output equals plain greedy decoding token for
token on every architecture fixture, with a draft that is the same model (every proposal
accepted) and with a different draft (the target's q8 KV cache loaded again: some proposals
rejected, the output unchanged); sampling keeps the target's distribution (a rejection scheme),
checked here as determinism per seed and the acceptance rate of a same-model draft."""
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
    other = m.generate(ids, max_tokens=20, stream=False, draft=load(arch, kv_dtype="int4"), draft_tokens=3)
    assert other.token_ids == want
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
