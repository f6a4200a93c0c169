"""One check for token ids at every entry point (Model.eval, generate, score, perplexity,
Tokenizer.decode, StreamDecoder.put): a sequence of integers (Python or NumPy) each in
[0, vocab). Floats, strings and bools are refused rather than converted, and a negative id is
never read as NumPy reads it (from the end). Bytes are text everywhere in akunu: UTF-8 that
generate() and perplexity() tokenize as they do a str, as Tokenizer.encode does; functions that
take ids only refuse them."""
from __future__ import annotations

import numbers

import numpy as np

from akunu._akunu import Error


class TokenIdError(Error, ValueError):
    """A token id outside [0, vocab): both an akunu.Error (as the engine's own check raises)
    and a ValueError (a bad argument)."""


def check_token_ids(ids, vocab: int, what: str) -> list[int]:
    """`ids` as a list of ints; TypeError for a non-integer, TokenIdError for one outside [0, vocab),
    each naming `what`, the id and its index."""
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{what}: expected a sequence of integer token ids, got {type(ids).__name__} "
                        "(text goes through tokenize() or generate())")
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{what}: token ids must be integers, got an array of {ids.dtype}")
        ids = ids.reshape(-1).tolist()
    out = []
    for k, i in enumerate(ids):
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TypeError(f"{what}: token id {i!r} at index {k} is not an integer")
        i = int(i)
        if not 0 <= i < vocab:
            raise TokenIdError(f"{what}: token id {i} at index {k} is out of range for a vocabulary of {vocab} "
                             f"(ids are in [0, {vocab}))")
        out.append(i)
    return out


def as_text(value) -> str | None:
    """A prompt's text: a str as is, bytes decoded as strict UTF-8; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")  # strict: invalid UTF-8 raises UnicodeDecodeError
    return None
