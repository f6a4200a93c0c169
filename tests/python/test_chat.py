"""Model.chat and apply_chat_template's defaults, against transformers' rendering of the same
template on the same tokenizer."""
from __future__ import annotations

import pytest

import akunu
from support.fixture_paths import require, requires_fixtures

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]

# ChatML, as Qwen's templates write it (the tiny fixtures ship without a template).
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
MESSAGES = [{"role": "system", "content": "You write Python."},
            {"role": "user", "content": "def add(a, b):"}]


@pytest.fixture(scope="module")
def model(backend):
    return akunu.Model(require("tiny-qwen3-random", "hf"), context=128)


def test_template_defaults_match_transformers(model):
    transformers = pytest.importorskip("transformers", reason="the reference rendering is transformers'")
    ref = transformers.AutoTokenizer.from_pretrained(require("tiny-qwen3-random", "hf"))
    for kwargs in ({}, {"add_generation_prompt": True}, {"tokenize": False}):
        ours = model.tokenizer.apply_chat_template(MESSAGES, chat_template=CHATML, **kwargs)
        theirs = ref.apply_chat_template(MESSAGES, chat_template=CHATML, return_dict=False, **kwargs)
        assert ours == theirs, kwargs
    assert isinstance(model.tokenizer.apply_chat_template(MESSAGES, chat_template=CHATML), list)


def test_chat_is_generate_after_the_rendered_conversation(model):
    reply = model.chat(MESSAGES, max_tokens=9, chat_template=CHATML)
    ids = model.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, chat_template=CHATML)
    header = model.tokenize("<|im_start|>assistant\n", add_special_tokens=False)
    assert ids[-len(header):] == header
    direct = model.generate(ids, max_tokens=9, stream=False)
    assert reply.token_ids == direct.token_ids and reply.text == direct.text and str(reply) == direct.text
    assert reply.prompt_tokens == len(ids)


def test_chat_streams_the_same_reply(model):
    sampler = akunu.Sampler(temperature=0.8, seed=5)
    whole = model.chat(MESSAGES, max_tokens=7, sampler=sampler, chat_template=CHATML)
    stream = model.chat(MESSAGES, max_tokens=7, sampler=sampler, chat_template=CHATML, stream=True)
    pieces = list(stream)
    assert [p.token_id for p in pieces] == whole.token_ids
    assert "".join(p.text for p in pieces) == whole.text == stream.result.text


@pytest.mark.parametrize("bad", ["hello", {"role": "user", "content": "hi"}, [{"content": "no role"}], ["text"]])
def test_malformed_messages_raise_type_error(model, bad):
    with pytest.raises(TypeError, match="messages"):
        model.chat(bad, chat_template=CHATML)


def test_no_template_says_how_to_pass_one(model):
    with pytest.raises(akunu.Error, match="no chat template; pass chat_template="):
        model.chat(MESSAGES)
