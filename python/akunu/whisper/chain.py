"""Greedy search in chains on the device (the engine's `decode_greedy`): the logit rules, the
argmax and the next step's input stay on the device for `chain_steps` steps per submission.

Each window's prompt goes through the decoder but for its last token, which the chain feeds
first; the no-speech probability is read at <|startoftranscript|> as the per-step search reads
it, by the host when the prompt goes on after it, by the chain's first pick when it ends there.
The result is the per-step search's at temperature 0 and one beam: the same tokens, and the same
log-probabilities up to float32 rounding.
"""
from __future__ import annotations

import numpy as np

from akunu.whisper.rules import log_softmax


def chain_applies(model, temperature: float, width: int) -> bool:
    """Greedy, one slot per window, on an engine whose chains are on (tuning whisper_chain)."""
    return temperature == 0 and width == 1 and getattr(model, "chain_steps", 0) > 0


def _prefill(model, groups, no_speech):
    """Feeds each prompt but its last token; returns the no-speech probability of the windows
    whose prompt goes on after <|startoftranscript|> (None for the others: the chain reads it)."""
    probs = [None] * len(groups)
    for g in groups:
        model.set_audio(g.slots[0], g.task.window)
        model.reset(g.slots[0])
    head = [i for i, g in enumerate(groups) if g.task.sot_index < len(g.task.prompt) - 1]
    if head:
        at_sot = np.array(model.decode([groups[i].slots[0] for i in head],
                                       [groups[i].task.prompt[:groups[i].task.sot_index + 1] for i in head]))
        for i, row in zip(head, at_sot):
            probs[i] = float(np.exp(log_softmax(row)[no_speech])) if no_speech is not None else 0.0
    rest = []
    for i, g in enumerate(groups):
        start = g.task.sot_index + 1 if probs[i] is not None else 0
        if len(g.task.prompt) - 1 > start:
            rest.append((g.slots[0], g.task.prompt[start:-1]))
    if rest:
        model.decode([s for s, _ in rest], [t for _, t in rest])
    return probs


def run_chains(model, groups, tokens):
    """(hypothesis, no_speech_prob) of each greedy group (search._Samples of width 1)."""
    probs = _prefill(model, groups, tokens.no_speech)
    rules = [g.task.rules for g in groups]
    picked = model.decode_greedy(
        [g.slots[0] for g in groups], [g.task.prompt[-1] for g in groups], [g.max_new for g in groups],
        [r.suppress.tolist() for r in rules], [r.begin_suppress.tolist() for r in rules],
        [bool(r.timestamps) for r in rules], [-1 if r.max_initial is None else int(r.max_initial) for r in rules],
        eot=tokens.eot, timestamp_begin=tokens.timestamp_begin, no_timestamps=tokens.no_timestamps,
        no_speech=-1 if tokens.no_speech is None else tokens.no_speech)
    out = []
    for g, prob, (toks, logprobs, chain_prob) in zip(groups, probs, picked):
        h = g.hyps[0]
        h.tokens = [int(t) for t in toks]
        if h.tokens and h.tokens[-1] == tokens.eot:
            h.tokens.pop()
        h.logprobs = [float(lp) for lp in logprobs]
        h.sum_logprob = float(sum(h.logprobs))
        h.finished = True
        out.append((h, chain_prob if prob is None else prob))
    return out
