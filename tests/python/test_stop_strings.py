"""Stop strings (generate(stop=...)): the text ends where the first stop string begins, also
when the stop string spans tokens, and a stream never shows a character of it, while the
characters that only looked like its start are shown once the next token rules it out."""
from __future__ import annotations

import pytest

import akunu
from akunu.sampling import stop_cut
from support.fixture_paths import require, requires_fixtures

PROMPT = "def function_1(x, y):\n    return"


@pytest.mark.parametrize(("text", "stops", "final", "cut"), [
    ("abc", [], False, (3, False)),
    ("abc", ["x"], False, (3, False)),
    ("abc", ["b"], False, (1, True)),
    ("abc", ["c", "ab"], False, (0, True)),     # the earliest occurrence, whichever stop it is
    ("abc", ["cd"], False, (2, False)),         # "c" may begin "cd": held back
    ("abc", ["bcd", "cx"], False, (1, False)),  # the longest tail that begins a stop
    ("abc", ["cd"], True, (3, False)),          # no token follows: nothing is held
    ("", ["a"], False, (0, False)),
    ("aaa", ["aab"], False, (1, False)),
])
def test_stop_cut(text, stops, final, cut):
    assert stop_cut(text, stops, final) == cut


@pytest.fixture(scope="module")
def model():
    return akunu.Model(require("tiny-qwen3-random", "hf"), context=256, device="cpu")


@pytest.fixture(scope="module")
def free_run(model):
    g = model.generate(PROMPT, max_tokens=12, stream=False, sampler=akunu.Sampler(temperature=0))
    return g.text, [model.tokenizer.decode([t]) for t in g.token_ids]


def _stops(text: str, pieces: list[str]) -> dict:
    """Stop strings that cut the free run in different ways."""
    a = len(pieces[0]) + len(pieces[1])  # the boundary between the second and third tokens
    return {"spans two tokens": [text[a - 1:a + 1]], "inside one token": [text[a + 1:a + 3]],
            "at the very start": [text[:2]], "the later of two": ["\x00never", text[a:a + 2]],
            "a near miss first": [text[a - 1:a + 1] + "\x00", text[a + 1:a + 3]]}


@requires_fixtures
@pytest.mark.parametrize("case", ["spans two tokens", "inside one token", "at the very start", "the later of two",
                                  "a near miss first"])
def test_text_ends_where_the_stop_string_begins(model, free_run, case):
    text, pieces = free_run
    stops = _stops(text, pieces)[case]
    want = text[:min(text.index(s) for s in stops if s in text)]
    g = model.generate(PROMPT, max_tokens=12, stream=False, sampler=akunu.Sampler(temperature=0), stop=stops)
    assert (g.text, g.stop_reason) == (want, "stop_string")
    streamed = [p.text for p in model.generate(PROMPT, max_tokens=12, sampler=akunu.Sampler(temperature=0),
                                               stop=stops)]
    assert "".join(streamed) == want


@requires_fixtures
def test_held_back_text_is_shown_at_max_tokens(model, free_run):
    text, _ = free_run
    stop = text[-1] + "\x00"  # the last character begins it; no token follows to complete it
    g = model.generate(PROMPT, max_tokens=12, stream=False, sampler=akunu.Sampler(temperature=0), stop=stop)
    assert (g.text, g.stop_reason) == (text, "max_tokens")
