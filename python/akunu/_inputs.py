"""The one rule for a context longer than a model knows (what a prompt may be is
akunu.token_ids.prompt_ids), and the check of integer arguments the engine takes as C ints.

A context longer than the model was trained for is clipped to the trained length with a
ContextWarning that names it; Model, plan and bench apply the same rule. A file's RoPE scaling
(llama3's, linear) is part of that length already: the config's max context is the scaled one.
"""
from __future__ import annotations

import warnings

DEFAULT_CONTEXT = 4096  # Model's context when none is given, or the trained one if shorter


INT_MAX = 2**31 - 1


def int_arg(value, name: str, lo: int = 0, hi: int = INT_MAX) -> int:
    """`value` as an int in [lo, hi], or a ValueError (TypeError for a non-integer) that names
    `name`: pybind11 would answer a value past a C int with "incompatible function arguments"."""
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value}")
    return int(value)


class ContextWarning(UserWarning):
    """A context was clipped to the length the model was trained for."""


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
