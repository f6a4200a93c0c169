"""akunu chat's conversation (akunu.chat_session): the KV cache kept between turns gives the
answers Model.chat gives from scratch, while each turn prefills only what is new."""
from __future__ import annotations

import pytest

import akunu
from akunu.chat_session import ChatSession
from support.fixture_paths import require, requires_fixtures

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TURNS = ["def add(a, b):", "and subtract?", "now multiply, with a docstring"]


@pytest.mark.parametrize("sampler", [akunu.Sampler(), akunu.Sampler(temperature=0.9, seed=4)])
def test_turns_equal_chat_from_scratch(sampler):
    m = akunu.Model(require("tiny-qwen3-random", "hf"), context=512)
    fresh = akunu.Model(require("tiny-qwen3-random", "hf"), context=512)
    session = ChatSession(m, sampler, system="You write Python.", max_tokens=12, chat_template=CHATML)
    for turn, text in enumerate(TURNS):
        before = list(session.messages)
        stream = session.ask(text)
        answer = "".join(p.text for p in stream)
        session.done(stream)
        want = fresh.chat(before + [{"role": "user", "content": text}], max_tokens=12, sampler=sampler,
                          chat_template=CHATML)
        assert answer == want.text, turn
        whole = len(m.tokenizer.apply_chat_template(session.messages[:-1], add_generation_prompt=True,
                                                    chat_template=CHATML))
        if turn:
            assert session.prefilled < whole // 2, (turn, session.prefilled, whole)


def test_a_stopped_answer_is_kept_and_the_next_turn_still_agrees():
    m = akunu.Model(require("tiny-qwen3-random", "hf"), context=512)
    session = ChatSession(m, max_tokens=20, chat_template=CHATML)
    stream = session.ask(TURNS[0])
    next(iter(stream))  # the user stops it after one piece
    session.done(stream)
    assert session.messages[-1]["role"] == "assistant"
    stream = session.ask(TURNS[1])
    answer = "".join(p.text for p in stream)
    session.done(stream)
    fresh = akunu.Model(require("tiny-qwen3-random", "hf"), context=512)
    assert answer == fresh.chat(session.messages[:-1], max_tokens=20, chat_template=CHATML).text
