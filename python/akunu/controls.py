"""Logit controls for generate(): penalties, logit bias, top-N logprobs, prompt logprobs and
Python logits processors.

The engine's steps sample on the device from the raw logits, in chains of steps per
submission. These controls need each step's logits on the host: generation that uses any of
them runs single steps, reads the logits row back, changes it in NumPy, and has the changed row
sampled by the device's own sampler (akunu.ops.sample: the kernel the engine's steps run) at the
token's position with the Sampler's seed. With every control neutral the host path therefore
draws exactly the tokens of the device path; with them it is slower (a step per submission and
a read-back of the vocabulary row per token), which is why it runs only when asked for.

Order of the changes, each step (as vLLM applies them):
  1. repetition_penalty r over every token of the prompt and the reply so far (as transformers'
     RepetitionPenaltyLogitsProcessor): a positive logit is divided by r, a negative one
     multiplied by it;
  2. presence_penalty a and frequency_penalty f over the reply's tokens (as OpenAI defines
     them): logit[t] -= a * (count[t] > 0) + f * count[t];
  3. logit_bias {token id: bias} added to the logits (OpenAI's -100 .. 100 bans or forces);
  4. logits_processors, each called as processor(input_ids, logits) -> logits with input_ids
     the prompt and reply so far (np.intc) and logits float32 [vocab] (llama-cpp-python's
     signature; transformers' processors take torch tensors, so wrap them).
Reported logprobs (the chosen token's and the top-N) are of the raw model distribution,
log_softmax of the unchanged logits, as the device path reports them.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from akunu import ops


@dataclass(frozen=True)
class LogitControls:
    """What generate() does to the logits before the sampler, and what it reports besides the
    chosen token. The defaults change nothing and report nothing more."""

    repetition_penalty: float = 1.0   # > 0; 1: off
    presence_penalty: float = 0.0     # 0: off
    frequency_penalty: float = 0.0    # 0: off
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    logits_processors: Sequence[Callable] = ()
    top_logprobs: int = 0             # logprobs=N: the N most likely tokens of every step
    prompt_logprobs: bool = False     # log p(prompt[i] | prompt[:i]) for every prompt token

    def validate(self, vocab_size: int) -> None:
        """Raises ValueError or TypeError naming the setting that is out of range."""
        if not (self.repetition_penalty > 0 and math.isfinite(self.repetition_penalty)):
            raise ValueError(f"repetition_penalty must be a finite number > 0 (1: off), got {self.repetition_penalty}")
        for name in ("presence_penalty", "frequency_penalty"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number (0: off), got {getattr(self, name)}")
        for token, bias in dict(self.logit_bias).items():
            if not isinstance(token, (int, np.integer)) or not 0 <= int(token) < vocab_size:
                raise ValueError(f"logit_bias: token {token!r} is not an id of this vocabulary [0, {vocab_size})")
            if math.isnan(bias) or bias == math.inf:
                raise ValueError(f"logit_bias[{token}] = {bias}: a bias must be a number (-inf bans the token)")
        for p in self.logits_processors:
            if not callable(p):
                raise TypeError(f"logits_processors: {p!r} is not callable as processor(input_ids, logits)")
        if not (isinstance(self.top_logprobs, int) and 0 <= self.top_logprobs <= vocab_size):
            raise ValueError(f"logprobs must be an int in [0, {vocab_size}] (the top-N per step), "
                             f"got {self.top_logprobs!r}")

    @property
    def on_host(self) -> bool:
        """Whether generation needs the host path (any control that is not neutral)."""
        return (self.repetition_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0
                or bool(self.logit_bias) or bool(self.logits_processors) or self.top_logprobs > 0
                or self.prompt_logprobs)

    def apply(self, logits: np.ndarray, history: Sequence[int], counts: np.ndarray) -> np.ndarray:
        """The changed logits (float32 [vocab], a new array) after `history` (prompt and reply
        token ids), with counts[t] the times t occurs in the reply."""
        z = np.array(logits, dtype=np.float32)
        if self.repetition_penalty != 1.0 and len(history):
            seen = np.unique(np.asarray(history, dtype=np.int64))
            z[seen] = np.where(z[seen] > 0, z[seen] / self.repetition_penalty, z[seen] * self.repetition_penalty)
        if self.presence_penalty or self.frequency_penalty:
            z -= (self.presence_penalty * (counts > 0) + self.frequency_penalty * counts).astype(np.float32)
        for token, bias in dict(self.logit_bias).items():
            z[int(token)] += np.float32(bias)
        for p in self.logits_processors:
            z = np.asarray(p(np.asarray(history, dtype=np.intc), z), dtype=np.float32)
            if z.shape != logits.shape:
                raise ValueError(f"logits processor {p!r} returned shape {z.shape}, expected {logits.shape}")
        if not np.isfinite(z).any() or np.isnan(z).any():
            raise ValueError("the logit controls left no token to sample (every logit -inf, or a NaN)")
        return z

    def top(self, logprobs: np.ndarray) -> list[tuple[int, float]] | None:
        """The top_logprobs most likely (id, logprob) pairs, most likely first (lowest id on ties)."""
        n = self.top_logprobs
        if n <= 0:
            return None
        part = np.argpartition(-logprobs, n - 1)[:n] if n < len(logprobs) else np.arange(len(logprobs))
        order = sorted(part.tolist(), key=lambda i: (-logprobs[i], i))
        return [(i, float(logprobs[i])) for i in order]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis, in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def prompt_logprobs(rows: np.ndarray, ids: Sequence[int], top=None) -> tuple[list, list | None]:
    """([None, log p(ids[1] | ids[:1]), ...], and with top (LogitControls.top) each position's
    top-N pairs, [None, [(id, logprob), ...], ...], else None) from the all-position logits of
    ids (row t predicts token t + 1; rows may hold one more row, which is not read)."""
    if len(ids) < 2:
        return [None], ([None] if top else None)
    lp = log_softmax(rows[: len(ids) - 1])
    chosen = [None] + lp[np.arange(len(ids) - 1), np.asarray(ids[1:])].tolist()
    return chosen, ([None] + [top(row) for row in lp] if top else None)


def host_steps(model, ids: Sequence[int], sampler, controls: LogitControls, result) -> Iterator[tuple]:
    """Tokens after `ids` as Model._sampled yields them, (id, logprob, the cache length that
    excludes it, top-N pairs or None), one step per submission with the logits changed on the
    host. Fills result.prompt_logprobs (and prompt_top_logprobs with logprobs=N) when asked. The prompt is run here."""
    e = model._engine
    if controls.prompt_logprobs:
        rows = e.eval(list(ids), True)
        result.prompt_logprobs, result.prompt_top_logprobs = prompt_logprobs(
            rows, ids, controls.top if controls.top_logprobs else None)
        logits = rows[-1]
    else:
        e.eval(list(ids))
        logits = model.scratch.read("logits")  # staged: a discrete GPU's mapped memory reads uncached
    history, counts = list(ids), np.zeros(len(logits), dtype=np.float64)
    while True:
        raw = log_softmax(logits)
        changed = controls.apply(logits, history, counts)
        token = int(ops.sample(changed, sampler.temperature, sampler.top_k, sampler.top_p, sampler.min_p,
                               sampler.seed, position=e.kv_length, device=model.device)[0][0])
        yield token, float(raw[token]), e.kv_length, controls.top(raw)
        if e.kv_length >= model.context:
            return
        e.decode(token)
        history.append(token)
        counts[token] += 1
        logits = model.scratch.read("logits")  # staged: a discrete GPU's mapped memory reads uncached


def completion_logprobs(tokenizer, token_ids: Sequence[int], logprobs: Sequence[float],
                        tops: Sequence | None, text_offset: int = 0) -> dict:
    """The `logprobs` object of an OpenAI (and llama-cpp-python) completion: tokens (their
    text), text_offset, token_logprobs and top_logprobs ([{token text: logprob}] per step, or
    None without logprobs=N). A None logprob or step (the first token of an echoed prompt) stays
    None."""
    texts = [tokenizer.decode([t]) for t in token_ids]
    offsets, at = [], text_offset
    for t in texts:
        offsets.append(at)
        at += len(t)
    top = None if tops is None else [None if step is None else {tokenizer.decode([i]): lp for i, lp in step}
                                     for step in tops]
    return {"tokens": texts, "text_offset": offsets,
            "token_logprobs": [None if x is None else float(x) for x in logprobs], "top_logprobs": top}


def chat_logprobs(tokenizer, token_ids: Sequence[int], logprobs: Sequence[float], tops: Sequence | None) -> dict:
    """The `logprobs` object of an OpenAI chat completion choice: {"content": [{token, logprob,
    bytes, top_logprobs: [{token, logprob, bytes}]}]}."""
    def entry(i, lp):
        text = tokenizer.decode([i])
        return {"token": text, "logprob": float(lp), "bytes": list(text.encode("utf-8"))}

    content = []
    for k, (i, lp) in enumerate(zip(token_ids, logprobs)):
        row = entry(i, lp)
        row["top_logprobs"] = [entry(j, v) for j, v in (tops[k] or [])] if tops is not None else []
        content.append(row)
    return {"content": content}
