"""akunu.Tokenizer: Hugging Face-identical tokenization from tokenizer.json or GGUF.

    tok = akunu.Tokenizer.from_file("model-dir")        # or tokenizer.json, or a .gguf
    ids = tok.encode("Hello")                            # BOS added as the tokenizer says
    tok.decode(ids, skip_special_tokens=True)
    tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)  # ids

Bytes given to encode() are decoded as strict UTF-8 (HF tokenizers accepts only str); invalid
UTF-8 raises UnicodeDecodeError naming the position.
"""
from __future__ import annotations

import errno
import os
import pathlib
import stat
from collections.abc import Iterable, Sequence

from akunu import _akunu
from akunu._akunu import Error
from akunu.token_ids import check_token_ids


def _read_text(path: pathlib.Path) -> str:
    """A JSON side file's text: a regular file of bounded size (the engine's read_side_file)."""
    try:
        return _akunu.read_side_file(str(path)).decode("utf-8")
    except UnicodeDecodeError as e:
        raise Error(f"{path}: not UTF-8 (invalid byte at offset {e.start})") from None


def _embeds_vocab(path: pathlib.Path) -> bool:
    """Whether a regular file is a model that embeds its vocabulary (GGUF, whisper.cpp's GGML);
    anything else than a regular file raises (a FIFO would block the read)."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        raise Error(f"cannot open '{path}': {'symlink loop' if e.errno == errno.ELOOP else e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise Error(f"'{path}' is not a regular file (a FIFO, device or socket is not read)")
    with open(path, "rb") as f:
        return f.read(4) in (b"GGUF", b"lmgg")


class Tokenizer:
    """Encodes text to ids and decodes ids to text exactly as HF tokenizers does."""

    def __init__(self, native: _akunu.Tokenizer):
        self._t = native
        # The names chat templates use; the loader resolved them from tokenizer_config.json or GGUF.
        self.bos_token = native.id_to_token(native.bos_id) if native.bos_id >= 0 else None
        self.eos_token = native.id_to_token(native.eos_id) if native.eos_id >= 0 else None

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path) -> Tokenizer:
        """tokenizer.json (with tokenizer_config.json beside it, if any), a model directory, a GGUF,
        a CTranslate2 model.bin or a whisper.cpp GGML file (whose vocabulary decodes only)."""
        p = pathlib.Path(os.fspath(path))
        if not p.exists() and not p.is_symlink():
            raise Error(f"'{p}' does not exist")
        if p.is_dir():
            p = p / "tokenizer.json"
            if not p.exists() and not p.is_symlink():
                raise Error(f"'{p.parent}' has no tokenizer.json")
        if _embeds_vocab(p) or p.name == "model.bin":  # a CTranslate2 model.bin: the tokenizer.json beside it
            return cls(_akunu.Tokenizer.from_model_files(_akunu.open_model(str(p))))
        config_path = p.parent / "tokenizer_config.json"
        config_text = _read_text(config_path) if config_path.exists() else None
        return cls(_akunu.Tokenizer.from_json(_read_text(p), config_text, str(p)))

    # ---- encoding and decoding ---------------------------------------------------------------
    def encode(self, text: str | bytes, add_special_tokens: bool = True, parse_special: bool = True) -> list[int]:
        """Token ids of `text`. parse_special=False treats special-token strings as plain text."""
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")  # strict: invalid UTF-8 raises UnicodeDecodeError
        if not isinstance(text, str):
            raise TypeError(f"encode takes str or bytes, not {type(text).__name__}")
        return self._t.encode(text, add_special_tokens, parse_special)

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True,
                     parse_special: bool = True) -> list[list[int]]:
        return self._t.encode_batch(list(texts), add_special_tokens, parse_special)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of `ids`: integers in [0, vocab_size) (akunu.token_ids: ValueError or TypeError
        otherwise)."""
        return self._t.decode(check_token_ids(ids, self._t.vocab_size, "decode"), skip_special_tokens)

    def stream(self, skip_special_tokens: bool = False) -> StreamDecoder:
        """An incremental decoder for streaming generation (never emits broken UTF-8)."""
        return StreamDecoder(self, skip_special_tokens)

    # ---- vocabulary --------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._t.vocab_size

    def get_vocab(self) -> dict[str, int]:
        """{token: id} for the whole vocabulary, added tokens included."""
        return {self._t.id_to_token(i): i for i in range(self._t.vocab_size)}

    def _id(self, i, what: str) -> int:
        """`i` checked as every entry point checks ids (plain ints in range skip the full check:
        constrained output asks for every id of the vocabulary)."""
        if type(i) is int and 0 <= i < self._t.vocab_size:
            return i
        return check_token_ids([i], self._t.vocab_size, what)[0]

    def id_to_token(self, i: int) -> str:
        return self._t.id_to_token(self._id(i, "id_to_token"))

    def token_to_id(self, token: str) -> int | None:
        return self._t.token_to_id(token)

    def is_special(self, i: int) -> bool:
        return self._t.is_special(self._id(i, "is_special"))

    @property
    def bos_id(self) -> int | None:
        return self._t.bos_id if self._t.bos_id >= 0 else None

    @property
    def eos_id(self) -> int | None:
        return self._t.eos_id if self._t.eos_id >= 0 else None

    @property
    def stop_ids(self) -> list[int]:
        """Ids that end generation: EOS plus the vocabulary's chat end markers."""
        return list(self._t.stop_ids)

    @property
    def added_tokens(self) -> list[dict]:
        return self._t.added_tokens

    @property
    def chat_template(self) -> str | None:
        return self._t.chat_template or None

    # ---- chat ----------------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False, tokenize: bool = True,
                            chat_template: str | None = None, **kwargs) -> list[int] | str:
        """Renders `messages` with the model's Jinja2 chat template as transformers does, with
        transformers' defaults: add_generation_prompt=False (pass True to end with the
        assistant's header, which generation needs; Model.chat does) and tokenize=True (token
        ids, the special tokens the template writes parsed as such and none added; pass
        tokenize=False for the text). Unlike transformers 5 (return_dict=True) the ids come as
        a plain list, which generate() takes as it is."""
        from akunu.chat_template import render

        template = chat_template or self.chat_template
        if not template:
            raise Error(f"{self._t.source}: the tokenizer has no chat template; pass chat_template=")
        text = render(template, messages=messages, add_generation_prompt=add_generation_prompt,
                      bos_token=self.bos_token or "", eos_token=self.eos_token or "", **kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def __repr__(self) -> str:
        return f"Tokenizer({self._t.source!r}, vocab={self.vocab_size})"


class StreamDecoder:
    """Turns ids arriving one at a time into text pieces whose concatenation equals decode(all).

    A piece is released only when the decoded text grew and does not end in U+FFFD, so a
    character split over several byte tokens comes out whole. Decoding restarts from a few
    tokens back each time, so decoders that strip a leading space still see the context.
    Tokens that complete no character for MAX_PENDING tokens (no UTF-8 character takes that
    many) are released as they decode, U+FFFD included, so each put() costs at most a window
    of MAX_PENDING tokens however long the stream.
    """

    MAX_PENDING = 8

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False):
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = 0  # start of the window re-decoded for context
        self._read = 0    # end of what has been emitted
        self._emitted = ""

    def put(self, token_id: int) -> str:
        """Adds one id; returns the new text (possibly empty)."""
        self._ids.extend(check_token_ids([token_id], self._tok.vocab_size, "StreamDecoder.put"))
        prefix_text = self._tok.decode(self._ids[self._prefix:self._read], self._skip)
        new_text = self._tok.decode(self._ids[self._prefix:], self._skip)
        stuck = len(self._ids) - self._read >= self.MAX_PENDING
        if len(new_text) > len(prefix_text) and (stuck or not new_text.endswith("\ufffd")):
            piece = new_text[len(prefix_text):]
            self._prefix, self._read = self._read, len(self._ids)
            self._emitted += piece
            return piece
        if stuck:  # nothing visible for that long: move the window on
            self._prefix, self._read = self._read, len(self._ids)
        return ""

    def flush(self) -> str:
        """The rest of the text, including a trailing U+FFFD if the ids end mid-character."""
        full = self._tok.decode(self._ids, self._skip)
        piece = full[len(self._emitted):] if full.startswith(self._emitted) else ""
        self._emitted += piece
        self._prefix = self._read = len(self._ids)
        return piece
