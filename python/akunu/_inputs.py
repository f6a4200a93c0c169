"""The one rule for a context longer than a model knows (what a prompt may be is
akunu.token_ids.prompt_ids).

A context longer than the model was trained for is clipped to the trained length with a
ContextWarning that names it; Model, plan and bench apply the same rule. A file's RoPE scaling
(llama3's, linear) is part of that length already: the config's max context is the scaled one.
"""
from __future__ import annotations

import warnings

DEFAULT_CONTEXT = 4096  # Model's context when none is given, or the trained one if shorter


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
