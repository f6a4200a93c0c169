"""What Model's calls take as a prompt, and the one rule for a context longer than a model knows.

A prompt is text or one sequence of token ids: a list, a 1-D integer array, a [1, n] array or
torch tensor, or a transformers BatchEncoding (its input_ids) of one sequence. Anything else
(a batch of several prompts, floats, ragged lists) is a TypeError that says what is expected.

A context longer than the model was trained for is clipped to the trained length with a
ContextWarning that names it; Model, plan and bench apply the same rule. A file's RoPE scaling
(llama3's, linear) is part of that length already: the config's max context is the scaled one.
"""
from __future__ import annotations

import warnings

import numpy as np

DEFAULT_CONTEXT = 4096  # Model's context when none is given, or the trained one if shorter

_EXPECTED = ("a str, or one sequence of token ids: a list of ints, a 1-D integer array, a [1, n] array or "
             "torch tensor, or a transformers BatchEncoding of one sequence")


class ContextWarning(UserWarning):
    """A context was clipped to the length the model was trained for."""


def token_ids(prompt, tokenize=None, what: str = "prompt") -> list[int]:
    """The token ids of `prompt` (text goes through `tokenize`); see the module docstring."""
    if isinstance(prompt, str):
        if tokenize is None:
            raise TypeError(f"{what}: expected token ids, got a str; tokenize it first (Model.tokenize)")
        return tokenize(prompt)
    if hasattr(prompt, "keys") and "input_ids" in prompt.keys():  # a BatchEncoding or a dict of one
        prompt = prompt["input_ids"]
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(p, str) for p in prompt):
        raise TypeError(f"{what}: got a list of {len(prompt)} prompts; a Model runs one sequence at a time: call "
                        "it once per prompt (Model.fork() gives each its own cache)")
    if hasattr(prompt, "detach") and hasattr(prompt, "cpu"):  # a torch tensor
        prompt = prompt.detach().cpu().numpy()
    try:
        array = np.asarray(prompt)
    except ValueError:
        raise TypeError(f"{what}: expected {_EXPECTED}; got ragged nested sequences") from None
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        shape = "x".join(str(n) for n in array.shape) or "scalar"
        raise TypeError(f"{what}: expected {_EXPECTED}; got {type(prompt).__name__} of shape {shape}, "
                        f"dtype {array.dtype}" + (" (a batch of several sequences: pass one at a time)"
                                                  if array.ndim == 2 else ""))
    return array.astype(np.int64).tolist()


def fit_context(requested: int | None, trained: int, what: str, rope_scaling: str = "none",
                default: int = DEFAULT_CONTEXT) -> int:
    """The context to use for `requested` positions of a model trained for `trained`: None gives
    min(default, trained); more than trained is clipped, with a ContextWarning naming `what`."""
    if requested is None:
        return min(default, trained)
    if requested < 1:
        raise ValueError(f"{what}: context must be positive, got {requested}")
    if requested <= trained:
        return requested
    scaled = f" (with its {rope_scaling} RoPE scaling)" if rope_scaling not in ("", "none") else ""
    warnings.warn(f"{what}: context {requested} clipped to {trained}, the positions the model was trained "
                  f"for{scaled}", ContextWarning, stacklevel=3)
    return trained
