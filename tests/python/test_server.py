"""The OpenAI-compatible server (akunu serve), started by the test on 127.0.0.1 as a user starts
it (python -m akunu serve), and driven with the official openai client: completions and chat
(greedy answers equal akunu's own generate), streaming, 16 concurrent clients, bad requests and
a client that goes away.

The server runs on the Vulkan device (lavapipe here) with two models at once (the loaded one
and a fork), so the 16 clients run on both; an encoder is served from the CPU backend. Each
backend's generation is tested against references elsewhere (test_controls, test_engine)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import akunu
from support.fixture_paths import require, requires_fixtures

openai = pytest.importorskip("openai", reason="the server is tested with the official openai client")
pytest.importorskip("fastapi", reason="akunu serve runs on fastapi")
pytest.importorskip("uvicorn", reason="akunu serve runs on uvicorn")
try:  # raw requests (bad JSON, big bodies): the HTTP client the openai package brings
    import httpx2 as httpx
except ImportError:
    httpx = pytest.importorskip("httpx", reason="raw requests (bad JSON, big bodies) need httpx")

pytestmark = requires_fixtures

KEY = "test-key-123"
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PROMPTS = [f"def function_{i}(x, y):\n    return" + " x" * (i % 5) for i in range(16)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_path, *args, device="cpu"):
    """python -m akunu serve on a free port of 127.0.0.1 (the test key); yields its base URL
    once /health answers, and stops it afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "akunu", "--device", device, "serve", str(model_path), "--port", str(port),
           "--model-name", "tiny", "--api-key", KEY, "--log-level", "warning", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"akunu serve exited: {proc.stdout.read()}")
        try:
            if httpx.get(base + "/health", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    yield base
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    template = tmp_path_factory.mktemp("server") / "chatml.jinja"
    template.write_text(CHATML)
    yield from start_server(require("tiny-qwen3-random", "hf"), "--chat-template", str(template), "--parallel", "2",
                            "--context", "1024", "--max-tokens-cap", "1000", "--max-request-bytes", "20000",
                            device="vulkan")


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def local():
    return akunu.Model(require("tiny-qwen3-random", "hf"), context=1024, device="vulkan")


def test_models_lists_the_served_name(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_greedy_completion_is_generate(client, local):
    r = client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=12, temperature=0, logprobs=3)
    g = local.generate(PROMPTS[0], max_tokens=12, stream=False, logprobs=3)
    choice = r.choices[0]
    assert choice.text == g.text and choice.finish_reason == "length"
    assert r.usage.prompt_tokens == g.prompt_tokens and r.usage.completion_tokens == 12
    assert choice.logprobs.token_logprobs == pytest.approx(g.logprobs, abs=1e-4)
    assert [len(t) for t in choice.logprobs.top_logprobs] == [3] * 12


def test_chat_is_model_chat(client, local):
    messages = [{"role": "user", "content": "def add(a, b):"}]
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=9, temperature=0)
    assert r.choices[0].message.content == local.chat(messages, max_tokens=9, chat_template=CHATML).text
    assert r.choices[0].message.role == "assistant"


@pytest.mark.parametrize("chat", [False, True])
def test_streaming_equals_the_whole_answer(client, chat):
    args = dict(model="tiny", max_tokens=10, temperature=0.7, seed=9)
    if chat:
        args["messages"] = [{"role": "user", "content": "Hello"}]
        whole = client.chat.completions.create(**args).choices[0].message.content
        chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **args))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        args["prompt"] = PROMPTS[1]
        whole = client.completions.create(**args).choices[0].text
        chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **args))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].usage.completion_tokens == 10


def test_n_choices_and_seeds(client, local):
    r = client.completions.create(model="tiny", prompt=PROMPTS[2], max_tokens=6, temperature=2.0, seed=21, n=3)
    want = local.generate(PROMPTS[2], max_tokens=6, stream=False, n=3, sampler=akunu.Sampler(temperature=2.0, seed=21))
    assert [c.text for c in sorted(r.choices, key=lambda c: c.index)] == [g.text for g in want]


def test_sixteen_concurrent_clients_get_their_solo_answers(client):
    def ask(prompt):
        return client.completions.create(model="tiny", prompt=prompt, max_tokens=16, temperature=0).choices[0].text

    solo = [ask(p) for p in PROMPTS]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(ask, PROMPTS))
    assert together == solo
    assert len(set(solo)) > 1  # the prompts differ, so should some answers


@pytest.mark.parametrize("body, status, words", [
    ({"prompt": "x"}, 400, "model: Field required"),
    ({"model": "tiny"}, 400, "prompt: Field required"),
    ({"model": "tiny", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"model": "tiny", "prompt": "x", "max_tokens": 5000}, 400, "cap of 1000"),
    ({"model": "tiny", "prompt": "x", "temperature": -1}, 400, "temperature"),
    ({"model": "tiny", "prompt": "x", "logit_bias": {"abc": 1}}, 400, "token ids"),
    ({"model": "tiny", "prompt": "x", "logit_bias": {"99999": 1}}, 400, "not an id of this vocabulary"),
    ({"model": "tiny", "prompt": [5, 99999]}, 400, "outside the vocabulary"),
    ({"model": "tiny", "prompt": []}, 400, "empty"),
    ({"model": "tiny", "prompt": "word " * 1500}, 400, "context"),
    ({"model": "other", "prompt": "x"}, 404, "not served here"),
    ({"model": "tiny", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "up to 4"),
    ({"model": "tiny", "prompt": "x", "response_format": {"type": "bogus"}}, 400, "response_format"),
    ({"model": "tiny", "prompt": "def f(", "suffix": "return 1"}, 400, "suffix"),
    ({"model": "tiny", "prompt": ["a", "b", "c", "d", "e"], "n": 13}, 400, "65 choices"),
    ({"model": "tiny", "prompt": "x", "n": 17}, 400, "n"),
    ({"model": "tiny", "prompt": "x", "stop": [""]}, 400, "non-empty"),
    ({"model": "tiny", "prompt": "x", "stop": "y" * 257}, 400, "up to 256 characters"),
    ({"model": "tiny", "prompt": "x", "logprobs": 21}, 400, "logprobs"),
])
def test_bad_completion_requests_get_a_clear_4xx(server, body, status, words):
    r = httpx.post(server + "/v1/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert words in error["message"] and error["type"]


def test_bad_chat_and_transport(server):
    auth = {"Authorization": f"Bearer {KEY}"}
    r = httpx.post(server + "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "wizard"}]},
                   headers=auth)
    assert r.status_code == 400 and "messages.0.role" in r.json()["error"]["message"]
    as_json = auth | {"content-type": "application/json"}
    r = httpx.post(server + "/v1/chat/completions", content=b"{not json", headers=as_json)
    assert r.status_code == 400
    r = httpx.post(server + "/v1/completions", content=json.dumps({"model": "tiny", "prompt": "x" * 30000}),
                   headers=as_json)
    assert r.status_code == 413 and "limit of 20000 bytes" in r.json()["error"]["message"]
    r = httpx.post(server + "/v1/completions", json={"model": "tiny", "prompt": "x"})
    assert r.status_code == 401
    r = httpx.post(server + "/v1/completions", json={"model": "tiny", "prompt": "x"},
                   headers={"Authorization": "Bearer no"})
    assert r.status_code == 401
    r = httpx.post(server + "/v1/embeddings", json={"model": "tiny", "input": "x", "pooling": "cls"}, headers=auth)
    assert r.status_code == 400 and "pooling" in r.json()["error"]["message"]


def test_a_client_that_goes_away_frees_its_model(server, client):
    auth = {"Authorization": f"Bearer {KEY}"}
    body = {"model": "tiny", "prompt": PROMPTS[3], "max_tokens": 1000, "temperature": 0.0, "stream": True,
            "logit_bias": {"1": 0.0}}  # the host path: a step per request round, so the stream is slow
    before = httpx.get(server + "/health", headers=auth).json()["generated_tokens"]
    with httpx.stream("POST", server + "/v1/completions", json=body, headers=auth, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(3):
            next(line for line in lines if line.startswith("data: "))
    for _ in range(200):
        health = httpx.get(server + "/health", headers=auth).json()
        if health["idle"] == health["models"]:
            break
        time.sleep(0.05)
    assert health["idle"] == health["models"] == 2
    time.sleep(0.5)
    after = httpx.get(server + "/health", headers=auth).json()["generated_tokens"]
    assert after == health["generated_tokens"] and after - before < 1000
    assert client.completions.create(model="tiny", prompt="x", max_tokens=2, temperature=0).choices[0].text is not None


def test_response_format_json_schema(client):
    pytest.importorskip("llguidance", reason="response_format runs on llguidance")
    schema = {"type": "object", "additionalProperties": False, "required": ["answer", "score"],
              "properties": {"answer": {"enum": ["yes", "no"]}, "score": {"type": "integer", "minimum": 0,
                                                                           "maximum": 10}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}}
    for seed in range(4):
        r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Verdict?"}],
                                           max_tokens=60, temperature=1.0, seed=seed, n=2, response_format=fmt)
        for choice in r.choices:
            data = json.loads(choice.message.content)
            assert set(data) == {"answer", "score"} and data["answer"] in ("yes", "no") and 0 <= data["score"] <= 10
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=5,
                                       response_format={"type": "json_schema", "json_schema": {"name": "x"}})


def test_embeddings_of_the_decoder(client, local):
    texts = ["def forward(self, x):", "import os"]
    r = client.embeddings.create(model="tiny", input=texts)
    got = np.array([d.embedding for d in sorted(r.data, key=lambda d: d.index)])
    np.testing.assert_allclose(got, local.embed(texts), atol=1e-5)
    floats = client.embeddings.create(model="tiny", input=texts[0], encoding_format="float").data[0].embedding
    np.testing.assert_allclose(floats, got[0], atol=1e-7)
    assert r.usage.prompt_tokens == sum(len(local.tokenize(t)) for t in texts)


def test_an_encoder_serves_embeddings(tmp_path):
    pytest.importorskip("torch", reason="the tiny BERT is written by transformers")
    from support.bert_reference import tiny_bert, wordpiece_tokenizer

    tiny_bert(tmp_path, wordpiece_tokenizer(lowercase=True, vocab_size=1500))
    texts = ["def fib(n): return n", "Hello, world!"]
    for base in start_server(tmp_path):
        client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
        for pooling in ("mean", "cls"):
            r = client.embeddings.create(model="tiny", input=texts, extra_body={"pooling": pooling})
            got = np.array([d.embedding for d in sorted(r.data, key=lambda d: d.index)])
            np.testing.assert_allclose(got, akunu.Encoder(tmp_path, device="cpu").embed(texts, pooling=pooling),
                                       atol=1e-5)
        with pytest.raises(openai.BadRequestError, match="encoder"):
            client.completions.create(model="tiny", prompt="x", max_tokens=2)


def test_echo_returns_the_prompts_logprobs(client, local):
    ids = local.tokenize(PROMPTS[4])
    r = client.completions.create(model="tiny", prompt=PROMPTS[4], max_tokens=3, temperature=0, echo=True, logprobs=2)
    choice = r.choices[0]
    lp = choice.logprobs
    assert choice.text.startswith(PROMPTS[4]) and len(lp.tokens) == len(ids) + 3
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    np.testing.assert_allclose(lp.token_logprobs[1:len(ids)], local.score(ids), atol=1e-3)
    assert all(len(t) == 2 for t in lp.top_logprobs[1:])


@pytest.mark.parametrize("logprobs", [None, 0, 2])
def test_echo_streams_the_prompt_first(client, logprobs):
    args = dict(model="tiny", prompt=PROMPTS[4], max_tokens=3, temperature=0, echo=True, logprobs=logprobs)
    whole = client.completions.create(**args).choices[0]
    chunks = [c.choices[0] for c in client.completions.create(stream=True, **args) if c.choices]
    assert chunks[0].text == PROMPTS[4] and "".join(c.text for c in chunks) == whole.text
    if logprobs is None:
        assert all(c.logprobs is None for c in chunks)
        return
    streamed = {k: sum((getattr(c.logprobs, k) or [] for c in chunks if c.logprobs), [])
                for k in ("tokens", "text_offset", "token_logprobs", "top_logprobs")}
    assert streamed["tokens"] == whole.logprobs.tokens and streamed["text_offset"] == whole.logprobs.text_offset
    assert streamed["token_logprobs"][0] is None
    np.testing.assert_allclose(streamed["token_logprobs"][1:], whole.logprobs.token_logprobs[1:], atol=1e-4)
    tops = [t and sorted(t) for t in whole.logprobs.top_logprobs or []]
    assert [t and sorted(t) for t in streamed["top_logprobs"]] == tops
    assert len(tops) == (len(streamed["tokens"]) if logprobs else 0)


@pytest.mark.parametrize("chat", [False, True])
def test_streamed_logprobs_are_the_whole_answers(client, chat):
    args = dict(model="tiny", max_tokens=6, temperature=0.8, seed=5)
    if chat:
        args |= dict(messages=[{"role": "user", "content": "Hi"}], logprobs=True, top_logprobs=2)
        whole = client.chat.completions.create(**args).choices[0].logprobs.content
        streamed = [x for c in client.chat.completions.create(stream=True, **args)
                    if c.choices and c.choices[0].logprobs for x in c.choices[0].logprobs.content]
        assert [x.token for x in streamed] == [x.token for x in whole]
        np.testing.assert_allclose([x.logprob for x in streamed], [x.logprob for x in whole], atol=1e-4)
        assert [len(x.top_logprobs) for x in streamed] == [2] * 6
        return
    args |= dict(prompt=PROMPTS[5], logprobs=2)
    whole = client.completions.create(**args).choices[0].logprobs
    chunks = [c.choices[0].logprobs for c in client.completions.create(stream=True, **args)
              if c.choices and c.choices[0].logprobs]
    assert sum((c.tokens for c in chunks), []) == whole.tokens
    assert sum((c.text_offset for c in chunks), []) == whole.text_offset
    np.testing.assert_allclose(sum((c.token_logprobs for c in chunks), []), whole.token_logprobs, atol=1e-4)
    assert [len(t) for c in chunks for t in c.top_logprobs] == [2] * 6


@pytest.mark.parametrize("chat", [False, True])
def test_n_choices_stream_by_index(client, chat):
    args = dict(model="tiny", max_tokens=5, temperature=1.5, seed=33, n=3)
    if chat:
        args["messages"] = [{"role": "user", "content": "Hello"}]
        whole = client.chat.completions.create(**args).choices
        want = {c.index: c.message.content for c in whole}
        chunks = list(client.chat.completions.create(stream=True, **args))
        text_of = lambda choice: choice.delta.content or ""  # noqa: E731
    else:
        args["prompt"] = [PROMPTS[6], PROMPTS[7]]
        want = {c.index: c.text for c in client.completions.create(**args).choices}
        chunks = list(client.completions.create(stream=True, **args))
        text_of = lambda choice: choice.text  # noqa: E731
    got, finished = {}, []
    for c in chunks:
        for choice in c.choices:
            got[choice.index] = got.get(choice.index, "") + text_of(choice)
            if choice.finish_reason:
                finished.append(choice.index)
    assert got == want and sorted(finished) == sorted(want) and len(want) == (3 if chat else 6)
    assert len(set(want.values())) > 1


def test_stop_strings_cut_the_text_in_both_modes(client, local):
    free = local.generate(PROMPTS[8], max_tokens=10, stream=False).text
    for stop in (free[3:6], [free[:1]], ["\x00", free[5:7]]):
        want = local.generate(PROMPTS[8], max_tokens=10, stream=False, stop=stop)
        args = dict(model="tiny", prompt=PROMPTS[8], max_tokens=10, temperature=0, stop=stop)
        whole = client.completions.create(**args).choices[0]
        streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **args) if c.choices)
        assert whole.text == streamed == want.text and whole.finish_reason == "stop", stop


@pytest.mark.slow
def test_lm_evals_local_completions_model(server, tmp_path, monkeypatch):
    """lm-evaluation-harness's own OpenAI-API model scores the local multiple-choice task through
    the server (echo + logprobs) as the in-process akunu model does (with the BOS token, which
    lm_eval's API models leave out unless add_bos_token=True)."""
    lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness drives the server here")
    pytest.importorskip("transformers", reason="local-completions tokenizes with a transformers tokenizer")
    pytest.importorskip("tenacity", reason="lm_eval's API models need its [api] extra (pip install 'lm_eval[api]')")
    from lm_eval.tasks import TaskManager

    import akunu.harness  # noqa: F401
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tasks = TaskManager(include_path=os.path.join(os.path.dirname(__file__), "support", "lm_eval_tasks"))
    hf = require("tiny-qwen3-random", "hf")
    remote = lm_eval.simple_evaluate(
        model="local-completions", tasks=["akunu_code_mc"], task_manager=tasks, log_samples=True,
        model_args=f"model=tiny,base_url={server}/v1/completions,tokenizer={hf},tokenizer_backend=huggingface,"
                   "num_concurrent=4,max_retries=1,add_bos_token=True")
    here = lm_eval.simple_evaluate(model="akunu", model_args=f"path={hf},device=cpu", tasks=["akunu_code_mc"],
                                   task_manager=tasks, log_samples=True)
    assert remote["results"]["akunu_code_mc"]["acc,none"] == here["results"]["akunu_code_mc"]["acc,none"]
    for a, b in zip(remote["samples"]["akunu_code_mc"], here["samples"]["akunu_code_mc"], strict=True):
        for (ra,), (rb,) in zip(a["resps"], b["resps"], strict=True):
            assert abs(ra[0] - rb[0]) <= 1e-3, (a["doc"], ra, rb)


def test_the_cpu_backend_serves_one_request_at_a_time(capsys):
    from akunu.server.pool import ModelPool

    pool = ModelPool(akunu.Model(require("tiny-qwen3-random", "hf"), context=64, device="cpu"), parallel=3)
    assert len(pool.models) == 1 and "--parallel is ignored" in capsys.readouterr().err


@pytest.mark.parametrize("chat", [False, True])
def test_the_finishing_chunk_carries_held_back_text(chat):
    """Text a stream held back (it began a stop string) and that a stop token then ended comes
    in the choice's finishing chunk."""
    from akunu.sampling import Generation, Piece
    from akunu.server import openai_api

    plan = openai_api.Plan([[1]], n=1, max_tokens=5, sampler=akunu.Sampler(), chat=chat)
    chunks = openai_api.Chunks(None, plan, "tiny", include_usage=False)
    chunks.piece(0, Piece(7, "ab", -0.5, 0.0))
    end = chunks.end(0, Generation(text="abc", stop_reason="stop_token"))["choices"][0]
    assert (end["delta"] == {"content": "c"}) if chat else (end["text"] == "c")
    assert end["finish_reason"] == "stop"
