"""akunu serve --batch: concurrent requests decode together in one akunu.Batch (continuous
batching), on each backend. Several openai clients at once (threads) get what a solo generate
gives them: greedy and seeded sampling alike (the batch samples a sequence keyed by its seed and
position, as a solo step does), with stop strings, max_tokens and streaming; /health's batch
counters show that steps ran more than one sequence. Logprobs agree with the solo path's within
LOGPROB_TOL: a batched step runs every row through the prefill GEMMs (docs/batch.md). Requests
with penalties take the solo path beside the batch, and equal generate too."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import akunu
from support.fixture_paths import require, requires_fixtures
from test_server import CHATML, KEY, PROMPTS, httpx, openai, start_server

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]

LOGPROB_TOL = 5e-2  # nats: GEMM rows against GEMV steps (docs/batch.md, "Batch against solo")
CONTEXT = 512


@pytest.fixture(scope="module")
def server(backend, tmp_path_factory):
    template = tmp_path_factory.mktemp("server") / "chatml.jinja"
    template.write_text(CHATML)
    yield from start_server(require("tiny-qwen3-random", "hf"), "--chat-template", str(template), "--batch", "4",
                            "--context", str(CONTEXT), device=backend)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def local(backend):
    return akunu.Model(require("tiny-qwen3-random", "hf"), context=CONTEXT, device=backend, progress=False)


def batch_stats(server) -> dict:
    return httpx.get(server + "/health", headers={"Authorization": f"Bearer {KEY}"}).json()["batch"]


def together(n, fn):
    """fn(i) for i in range(n), from n threads released at once."""
    start = threading.Barrier(n)

    def run(i):
        start.wait()
        return fn(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def completion(client, i, stream, **args):
    """The text, finish reason and token logprobs of one completion, streamed or not."""
    if not stream:
        choice = client.completions.create(model="tiny", **args).choices[0]
        lp = choice.logprobs.token_logprobs if choice.logprobs else None
        return choice.text, choice.finish_reason, lp
    chunks = [c.choices[0] for c in client.completions.create(model="tiny", stream=True, **args) if c.choices]
    lp = None
    if args.get("logprobs") is not None:
        lp = sum((c.logprobs.token_logprobs for c in chunks if c.logprobs), [])
    return "".join(c.text for c in chunks), next(c.finish_reason for c in chunks if c.finish_reason), lp


def test_concurrent_greedy_requests_are_solo_generate_and_batched(server, client, local):
    before = batch_stats(server)
    n = 8  # twice the batch: half of them wait for a sequence to leave
    args = [dict(prompt=PROMPTS[i], max_tokens=7 + 3 * i, temperature=0, logprobs=(i % 3) or None) for i in range(n)]
    got = together(n, lambda i: completion(client, i, stream=i % 2 == 1, **args[i]))
    for i, (text, finish, lp) in enumerate(got):
        g = local.generate(PROMPTS[i], max_tokens=args[i]["max_tokens"], stream=False)
        assert (text, finish) == (g.text, "length"), i
        if lp is not None:
            np.testing.assert_allclose(lp, g.logprobs, atol=LOGPROB_TOL)
    after = batch_stats(server)
    assert after["sequences"] - before["sequences"] == n
    assert after["batched_steps"] > before["batched_steps"]
    assert after["most_sequences_in_a_step"] == 4
    assert after["running"] == after["waiting"] == 0


def test_seeded_sampling_stop_strings_and_chat_equal_solo(client, local):
    samplers = [akunu.Sampler(temperature=0.9, top_k=40, top_p=0.9, min_p=0.05, seed=100 + i) for i in range(4)]
    want = [local.generate(PROMPTS[8 + i], max_tokens=12, sampler=s, stream=False) for i, s in enumerate(samplers)]
    # a stop string from the middle of each greedy answer
    greedy = [local.generate(PROMPTS[12 + i], max_tokens=16, stream=False).text for i in range(3)]
    stops = [t[len(t) // 2: len(t) // 2 + 3] for t in greedy]
    cut = [local.generate(PROMPTS[12 + i], max_tokens=16, stop=stops[i], stream=False) for i in range(3)]
    messages = [{"role": "user", "content": "def add(a, b):"}]
    chat = local.chat(messages, max_tokens=9, chat_template=CHATML)

    def ask(i):
        if i < 4:
            s = samplers[i]
            return completion(client, i, i % 2 == 0, prompt=PROMPTS[8 + i], max_tokens=12, temperature=s.temperature,
                              top_p=s.top_p, seed=s.seed, extra_body={"top_k": s.top_k, "min_p": s.min_p})[:2]
        if i < 7:
            return completion(client, i, i % 2 == 0, prompt=PROMPTS[12 + i - 4], max_tokens=16, temperature=0,
                              stop=stops[i - 4])[:2]
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=9, temperature=0)
        return r.choices[0].message.content, r.choices[0].finish_reason

    got = together(8, ask)
    assert [t for t, _ in got[:4]] == [g.text for g in want]
    assert got[4:7] == [(g.text, "stop" if g.stop_reason == "stop_string" else "length") for g in cut]
    assert any(g.stop_reason == "stop_string" for g in cut)
    assert got[7][0] == chat.text


def test_n_choices_and_solo_path_requests_beside_the_batch(client, local):
    """n > 1 runs its choices as sequences of the batch (choice k with seed + k); a request with
    a repetition penalty runs on the model itself while the batch steps."""
    sampler = akunu.Sampler(temperature=1.5, seed=33)
    want_n = local.generate(PROMPTS[0], max_tokens=6, stream=False, n=3, sampler=sampler)
    want_pen = local.generate(PROMPTS[1], max_tokens=10, stream=False, repetition_penalty=1.3)

    def ask(i):
        if i == 0:
            r = client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=6, temperature=1.5, seed=33, n=3)
            return [c.text for c in sorted(r.choices, key=lambda c: c.index)]
        if i == 1:
            return client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=10, temperature=0,
                                             extra_body={"repetition_penalty": 1.3}).choices[0].text
        return completion(client, i, True, prompt=PROMPTS[i], max_tokens=20, temperature=0)[0]

    got = together(4, ask)
    assert got[0] == [g.text for g in want_n]
    assert got[1] == want_pen.text
    assert got[2:] == [local.generate(PROMPTS[i], max_tokens=20, stream=False).text for i in (2, 3)]


def test_a_client_that_goes_away_leaves_the_batch(server, client):
    auth = {"Authorization": f"Bearer {KEY}"}
    body = {"model": "tiny", "prompt": PROMPTS[3], "max_tokens": CONTEXT - 40, "temperature": 0.0, "stream": True}
    with httpx.stream("POST", server + "/v1/completions", json=body, headers=auth, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(3):
            next(line for line in lines if line.startswith("data: "))
    for _ in range(400):
        stats = batch_stats(server)
        if stats["running"] == 0:
            break
        threading.Event().wait(0.05)
    assert stats["running"] == stats["waiting"] == 0
    assert client.completions.create(model="tiny", prompt="x", max_tokens=2, temperature=0).choices[0].text is not None
