"""One check for token ids at every entry point (Model.eval, generate, score, perplexity,
Tokenizer.decode, StreamDecoder.put): a sequence of integers (Python or NumPy) each in
[0, vocab). Model's calls also take one sequence in the forms transformers hands out: a 1-D
or [1, n] array or torch tensor, or a BatchEncoding's input_ids (prompt_ids); a batch of
several prompts is a TypeError that says a Model runs one sequence at a time. Floats,
strings and bools are refused rather than converted, and a negative id is never read as
NumPy reads it (from the end). Bytes are text everywhere in akunu: UTF-8 that
generate() and perplexity() tokenize as they do a str, as Tokenizer.encode does; functions that
take ids only refuse them."""
from __future__ import annotations

import numbers

import numpy as np

from akunu._akunu import Error


class TokenIdError(Error, ValueError):
    """A token id outside [0, vocab): both an akunu.Error (as the engine's own check raises)
    and a ValueError (a bad argument)."""


EXPECTED = ("a str, or one sequence of token ids: a list of ints, a 1-D integer array, a [1, n] array or "
            "torch tensor, or a transformers BatchEncoding of one sequence")


def prompt_ids(prompt, vocab: int, what: str, tokenize=None, bytes_text: bool = False) -> list[int]:
    """The token ids of `prompt`: a str goes through `tokenize` (where given; bytes too, as
    UTF-8, with bytes_text), one sequence of ids in any of the forms above is checked by
    check_token_ids."""
    text = as_text(prompt) if bytes_text else prompt if isinstance(prompt, str) else None
    if text is not None and tokenize is not None:
        return tokenize(text)
    return check_token_ids(_one_sequence(prompt, what), vocab, what)


def _one_sequence(prompt, what: str):
    """A BatchEncoding's input_ids, a torch tensor as an array, a [1, n] batch as its one row;
    a batch of several prompts raises TypeError."""
    if hasattr(prompt, "keys") and "input_ids" in prompt.keys():  # a BatchEncoding or a dict of one
        prompt = prompt["input_ids"]
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(p, str) for p in prompt):
        raise TypeError(f"{what}: got a list of {len(prompt)} prompts; a Model runs one sequence at a time: call "
                        "it once per prompt (Model.fork() gives each its own cache)")
    if hasattr(prompt, "detach") and hasattr(prompt, "cpu"):  # a torch tensor
        prompt = prompt.detach().cpu().numpy()
    if isinstance(prompt, (list, tuple)) and len(prompt) == 1 and isinstance(prompt[0], (list, tuple, np.ndarray)):
        prompt = np.asarray(prompt[0])  # [[ids]]: one sequence in a batch of one
    if isinstance(prompt, np.ndarray) and prompt.ndim == 2 and prompt.shape[0] == 1:
        prompt = prompt[0]
    if isinstance(prompt, np.ndarray) and prompt.ndim != 1:
        shape = "x".join(str(n) for n in prompt.shape) or "scalar"
        raise TypeError(f"{what}: expected {EXPECTED}; got an array of shape {shape}, dtype {prompt.dtype}" +
                        (" (a batch of several sequences: pass one at a time)" if prompt.ndim == 2 else ""))
    return prompt


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
            raise TypeError(f"{what}: token id {i!r} at index {k} is not an integer (expected {EXPECTED})")
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
