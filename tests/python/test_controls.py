"""Logit controls in generate (akunu.controls): penalties, logit bias, top-N and prompt
logprobs, n samples and logits processors, each against a NumPy reference loop that runs the
model one token at a time and applies the formulas written out here."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu.controls import chat_logprobs, completion_logprobs
from support.fixture_paths import require, requires_fixtures

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]

PROMPT = "def forward(self, hidden_states):"


@pytest.fixture(scope="module")
def model(backend):
    return akunu.Model(require("tiny-qwen3-random", "hf"), context=128)


def reference(m, ids, steps, sampler, rep=1.0, presence=0.0, frequency=0.0, bias=None):
    """Tokens of a plain loop: eval one token at a time, change the logits with the formulas
    of transformers (repetition) and OpenAI (presence, frequency, bias), sample on the device."""
    m.reset()
    logits = np.array(m.eval(ids), dtype=np.float64)
    history, out = list(ids), []
    for _ in range(steps):
        z = logits.copy()
        for t in set(history):
            z[t] = z[t] / rep if z[t] > 0 else z[t] * rep
        for t in set(out):
            z[t] -= presence + frequency * out.count(t)
        for t, b in (bias or {}).items():
            z[t] += b
        token = int(akunu.ops.sample(z.astype(np.float32), sampler.temperature, sampler.top_k, sampler.top_p,
                                     sampler.min_p, sampler.seed, position=len(history), device=m.device)[0][0])
        out.append(token)
        history.append(token)
        logits = np.array(m.eval([token], reset=False), dtype=np.float64)
    return out


def log_softmax(z):
    z = np.asarray(z, np.float64) - np.max(z, axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("sampler", [akunu.Sampler(), akunu.Sampler(temperature=0.9, top_p=0.95, seed=3)])
def test_neutral_controls_draw_the_device_paths_tokens(model, sampler):
    device = model.generate(PROMPT, max_tokens=12, sampler=sampler, stream=False)
    host = model.generate(PROMPT, max_tokens=12, sampler=sampler, stream=False, logit_bias={5: 0.0})
    assert host.token_ids == device.token_ids
    np.testing.assert_allclose(host.logprobs, device.logprobs, atol=1e-3)


@pytest.mark.parametrize("kwargs", [
    dict(rep=1.7), dict(presence=1.5), dict(frequency=0.9), dict(rep=1.3, presence=0.5, frequency=0.5),
    dict(bias={17: 4.0, 100: -3.5, 1999: 2.5})])
@pytest.mark.parametrize("sampler", [akunu.Sampler(), akunu.Sampler(temperature=1.1, seed=11)])
def test_penalties_and_bias_match_the_reference(model, kwargs, sampler):
    ids = model.tokenize(PROMPT)
    want = reference(model, ids, 10, sampler, **kwargs)
    got = model.generate(ids, max_tokens=10, sampler=sampler, stream=False,
                         repetition_penalty=kwargs.get("rep", 1.0), presence_penalty=kwargs.get("presence", 0.0),
                         frequency_penalty=kwargs.get("frequency", 0.0), logit_bias=kwargs.get("bias"))
    assert got.token_ids == want[: len(got.token_ids)]
    assert len(got.token_ids) == 10 or got.stop_reason == "stop_token"


def test_logit_bias_forces_and_bans(model):
    forced = model.generate(PROMPT, max_tokens=5, stream=False, logit_bias={321: 100.0})
    assert forced.token_ids == [321] * 5
    first = model.generate(PROMPT, max_tokens=1, stream=False).token_ids[0]
    model.reset()
    raw = np.array(model.eval(model.tokenize(PROMPT)), dtype=np.float64)
    raw[first] = -np.inf
    banned = model.generate(PROMPT, max_tokens=1, stream=False, logit_bias={first: -np.inf})
    assert banned.token_ids == [int(np.argmax(raw))]


def test_top_logprobs_are_the_models_distribution(model):
    g = model.generate(PROMPT, max_tokens=6, stream=False, logprobs=5)
    ids = model.tokenize(PROMPT)
    model.reset()
    rows = log_softmax(model.eval(ids + g.token_ids[:-1], all_logits=True))[len(ids) - 1:]
    assert len(g.top_logprobs) == len(g.token_ids) == 6
    for step, (top, token, row) in enumerate(zip(g.top_logprobs, g.token_ids, rows)):
        assert len(top) == 5 and [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
        assert top[0][0] == token, step  # greedy: the chosen token is the most likely
        ref = np.sort(row)[::-1][:5]
        np.testing.assert_allclose([lp for _, lp in top], ref, atol=2e-2)
        np.testing.assert_allclose([row[i] for i, _ in top], ref, atol=2e-2)
    streamed = list(model.generate(PROMPT, max_tokens=6, logprobs=2))
    assert [p.top_logprobs for p in streamed] == [t[:2] for t in g.top_logprobs]


def test_prompt_logprobs_equal_score(model):
    ids = model.tokenize(PROMPT)
    g = model.generate(ids, max_tokens=2, stream=False, prompt_logprobs=True)
    assert g.prompt_logprobs[0] is None and len(g.prompt_logprobs) == len(ids)
    np.testing.assert_allclose(g.prompt_logprobs[1:], model.score(ids), atol=1e-4)
    samples = model.generate(ids, max_tokens=2, stream=False, prompt_logprobs=True, n=2)
    np.testing.assert_allclose(samples[1].prompt_logprobs[1:], model.score(ids), atol=1e-4)


def test_n_samples_are_the_seeds_in_turn(model):
    sampler = akunu.Sampler(temperature=3.0, seed=40)
    samples = model.generate(PROMPT, max_tokens=8, sampler=sampler, stream=False, n=3)
    assert len(samples) == 3 and all(s.prompt_tokens == len(model.tokenize(PROMPT)) for s in samples)
    for i, s in enumerate(samples):
        alone = model.generate(PROMPT, max_tokens=8, sampler=akunu.Sampler(temperature=3.0, seed=40 + i), stream=False)
        assert s.token_ids == alone.token_ids, i
    assert len({tuple(s.token_ids) for s in samples}) > 1
    greedy = model.generate(PROMPT, max_tokens=8, stream=False, n=2, logprobs=1)
    assert greedy[0].token_ids == greedy[1].token_ids == model.generate(PROMPT, max_tokens=8, stream=False).token_ids


def test_logits_processor_sees_the_history_and_masks(model):
    seen = []

    def odd_only(input_ids, logits):
        seen.append(input_ids.copy())
        out = logits.copy()
        out[::2] = -np.inf
        return out

    ids = model.tokenize(PROMPT)
    g = model.generate(ids, max_tokens=6, stream=False, logits_processors=[odd_only])
    assert g.token_ids and all(t % 2 == 1 for t in g.token_ids)
    assert [list(s) for s in seen] == [ids + g.token_ids[:k] for k in range(len(g.token_ids))]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(repetition_penalty=0.0), ValueError, "repetition_penalty"),
    (dict(presence_penalty=float("nan")), ValueError, "presence_penalty"),
    (dict(logit_bias={5000: 1.0}), ValueError, "logit_bias: token 5000"),
    (dict(logit_bias={"a": 1.0}), ValueError, "logit_bias: token 'a'"),
    (dict(logprobs=-1), ValueError, "logprobs must be"),
    (dict(logits_processors=[3]), TypeError, "not callable"),
    (dict(n=0), ValueError, "n must be"),
    (dict(n=2, stream=True), ValueError, "stream=False"),
    (dict(logits_processors=[lambda i, z: z[:5]]), ValueError, "returned shape"),
    (dict(logits_processors=[lambda i, z: z * -np.inf]), ValueError, "no token to sample"),
])
def test_bad_controls_raise_and_leave_the_model_working(model, kwargs, error, match):
    kwargs.setdefault("stream", False)
    with pytest.raises(error, match=match):
        model.generate(PROMPT, max_tokens=3, **kwargs)
    assert len(model.generate(PROMPT, max_tokens=3, stream=False).token_ids) == 3


def test_openai_shapes(model):
    g = model.generate(PROMPT, max_tokens=4, stream=False, logprobs=2)
    c = completion_logprobs(model.tokenizer, g.token_ids, g.logprobs, g.top_logprobs, text_offset=7)
    assert "".join(c["tokens"]) == model.detokenize(g.token_ids)
    assert c["text_offset"][0] == 7 and len(c["top_logprobs"]) == 4 and len(c["top_logprobs"][0]) <= 2
    chat = chat_logprobs(model.tokenizer, g.token_ids, g.logprobs, g.top_logprobs)["content"]
    assert [e["logprob"] for e in chat] == g.logprobs and len(chat[0]["top_logprobs"]) == 2
