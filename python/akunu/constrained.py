"""Constrained output: JSON schemas, regular expressions and context-free grammars, through
llguidance (pip install llguidance).

    p = akunu.constrained.json_schema(m, {"type": "object", "properties": {...}})
    g = m.generate(prompt, logits_processors=[p], stream=False)     # g.text parses
    akunu.constrained.regex(m, r"[0-9]{3}-[0-9]{4}")
    akunu.constrained.lark(m, 'start: "yes" | "no"')

Each function returns a logits processor for generate() (and chat()): at every step it feeds
the tokens generated so far to an llguidance matcher and sets the logits of every token the
grammar does not allow next to -inf, before the sampler (and its temperature and filters) run.
Once the grammar is complete only EOS is allowed, so generation ends there. The mask is applied
on the host: generation with a processor runs one step per submission (akunu.controls).

llguidance rather than xgrammar: it computes masks lazily with an Earley parser, so a grammar
costs no precompilation over the vocabulary and any context-free grammar (Lark syntax) works,
not only JSON; its wheel has no dependencies (xgrammar pulls in torch, triton and
transformers); and llama.cpp, vLLM and SGLang use it.

The matcher reads a Hugging Face model's tokenizer.json itself. For a GGUF file it is given
each token's bytes, from the vocabulary as GGUF stores it (tokenizer.ggml.model). In byte-level
BPE ("gpt2") each character of a token stands for one byte (GPT-2's byte-to-unicode map). In
SentencePiece ("llama": llama 2, mistral, gemma) "<0xNN>" is the byte NN and U+2581 a space,
the rest is the token's UTF-8 text, as llama.cpp's token_to_piece gives it.
Control tokens and the unknown token are special: the grammar never allows them as text.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np

from akunu._akunu import Error


def _llguidance():
    try:
        import llguidance
        import llguidance.numpy
    except ImportError:
        raise ImportError("constrained output needs llguidance: pip install llguidance") from None
    return llguidance


@lru_cache(maxsize=1)
def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's map from the printable stand-in characters of byte-level BPE to bytes."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    chars, extra = {b: b for b in kept}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


def _gpt2_bytes(token: str) -> bytes:
    """A byte-level BPE token's bytes: each character stands for one byte."""
    table = _gpt2_byte_decoder()
    return bytes(table.get(c, 0x3F) for c in token)


def _spm_bytes(token: str) -> bytes:
    """A SentencePiece token's bytes: <0xNN> is one byte, U+2581 a space."""
    byte = _SPM_BYTE.fullmatch(token)
    return bytes([int(byte.group(1), 16)]) if byte else token.replace("\u2581", " ").encode()


_SPM_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")

# tokenizer.ggml.model -> a token's bytes from its text as GGUF stores it
_TOKEN_BYTES = {"gpt2": _gpt2_bytes, "llama": _spm_bytes}


class _GGUFVocabulary:
    """What llguidance's TokenizerWrapper reads: token bytes, special ids, BOS/EOS, encode."""

    def __init__(self, tokenizer, path: str):
        from akunu._akunu import open_model

        metadata = open_model(path).metadata
        kind = metadata.get("tokenizer.ggml.model")
        if kind not in _TOKEN_BYTES:
            raise Error(f"{path}: constrained output reads GGUF vocabularies of tokenizer.ggml.model "
                        f"{sorted(_TOKEN_BYTES)}, this one is {kind!r}; load the model's Hugging Face folder instead")
        bytes_of = _TOKEN_BYTES[kind]
        self._t = tokenizer
        self.eos_token_id, self.bos_token_id = tokenizer.eos_id, tokenizer.bos_id
        unknown = metadata.get("tokenizer.ggml.unknown_token_id")
        self.special_token_ids = [i for i in range(tokenizer.vocab_size) if tokenizer.is_special(i) or i == unknown]
        special = set(self.special_token_ids)
        self.tokens = [tokenizer.id_to_token(i).encode() if i in special else bytes_of(tokenizer.id_to_token(i))
                       for i in range(tokenizer.vocab_size)]

        self._ids = {b: i for i, b in enumerate(self.tokens) if b and i not in special}
        self._longest = max(map(len, self._ids))

    def __call__(self, text: str | bytes) -> list[int]:
        """The tokenizer's encoding where its tokens spell `text` byte for byte, else the
        longest-match one: a SentencePiece vocabulary prepends a space to what it encodes."""
        data = text if isinstance(text, bytes) else text.encode()
        ids = self._t.encode(data, add_special_tokens=False, parse_special=False)
        return ids if b"".join(self.tokens[i] for i in ids) == data else self._longest_match(data)

    def _longest_match(self, data: bytes) -> list[int]:
        ids, at = [], 0
        while at < len(data):
            sizes = range(min(self._longest, len(data) - at), 0, -1)
            size = next((n for n in sizes if data[at:at + n] in self._ids), 0)
            if not size:
                raise ValueError(f"{self._t.source}: no token of the vocabulary spells byte {data[at]:#04x}")
            ids.append(self._ids[data[at:at + size]])
            at += size
        return ids


def token_bytes(tokenizer, path: str) -> list[bytes]:
    """The bytes of every token of a GGUF file's vocabulary (what the matcher sees)."""
    return _GGUFVocabulary(tokenizer, path).tokens


@lru_cache(maxsize=8)
def _lltokenizer(source: str, eos: int, n_vocab: int, tokenizer=None):
    llg = _llguidance()
    if source.endswith(".json"):
        with open(source, encoding="utf-8") as f:
            return llg.LLTokenizer(f.read(), n_vocab=n_vocab, eos_token=eos)
    from llguidance import TokenizerWrapper

    return llg.LLTokenizer(TokenizerWrapper(_GGUFVocabulary(tokenizer, source)), n_vocab=n_vocab, eos_token=eos)


class GrammarProcessor:
    """A logits processor that keeps generation inside a grammar (an llguidance grammar string).
    It follows one sequence: a call with no more ids than the first one it saw starts over (the
    next of generate(n=)'s samples)."""

    def __init__(self, model, grammar: str):
        tok = model.tokenizer
        llg = _llguidance()
        self._matcher = llg.LLMatcher(_lltokenizer(tok._t.source, tok.eos_id, model.config.vocab_size, tok), grammar,
                                      log_level=0)
        if self._matcher.is_error():
            raise ValueError(f"grammar: {self._matcher.get_error()}")
        self._mask = llg.numpy.allocate_token_bitmask(1, model.config.vocab_size)
        self._start = self._seen = None

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        llg = _llguidance()
        if self._start is None or len(input_ids) <= self._start:
            self._matcher.reset()
            self._start = self._seen = len(input_ids)
        new = [int(t) for t in input_ids[self._seen:]]
        if new and not self._matcher.consume_tokens(new):
            raise ValueError(f"grammar: token {new} was not allowed ({self._matcher.get_error()})")
        self._seen = len(input_ids)
        llg.numpy.fill_next_token_bitmask(self._matcher, self._mask, 0)
        out = np.ascontiguousarray(logits, dtype=np.float32).copy()
        llg.numpy.apply_token_bitmask_inplace(out, self._mask)
        return out


def json_schema(model, schema: dict | str, compact: bool = True) -> GrammarProcessor:
    """Output that is JSON valid against `schema` (a dict or its JSON text); compact: no
    whitespace between tokens of the JSON (else the model may put it where JSON allows)."""
    llg = _llguidance()
    schema = json.loads(schema) if isinstance(schema, str) else dict(schema)
    schema.setdefault("x-guidance", {"whitespace_flexible": not compact})
    try:
        grammar = llg.LLMatcher.grammar_from_json_schema(json.dumps(schema))
    except (ValueError, RuntimeError) as e:
        raise ValueError(f"json schema: {e}") from None
    return GrammarProcessor(model, grammar)


def regex(model, pattern: str) -> GrammarProcessor:
    """Output that matches the regular expression `pattern` in full."""
    return GrammarProcessor(model, _llguidance().LLMatcher.grammar_from_regex(pattern))


def lark(model, grammar: str) -> GrammarProcessor:
    """Output in the context-free grammar `grammar`, in llguidance's Lark syntax (start: ...)."""
    return GrammarProcessor(model, _llguidance().LLMatcher.grammar_from_lark(grammar))


def response_format_processor(model, response_format: dict) -> GrammarProcessor:
    """The processor of an OpenAI response_format: {"type": "json_object"} (any JSON object) or
    {"type": "json_schema", "json_schema": {"schema": {...}}}; ValueError for anything else."""
    kind = response_format.get("type")
    if kind == "json_object":
        return json_schema(model, {"type": "object"})
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        if not isinstance(spec.get("schema"), dict):
            raise ValueError("response_format json_schema needs {'json_schema': {'schema': {...}}}")
        return json_schema(model, spec["schema"])
    raise ValueError(f"response_format type {kind!r} is not supported (text, json_object, json_schema)")
