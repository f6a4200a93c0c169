"""Sampler settings and generation results.

The determinism contract (docs/determinism.md): for one model file, device, prompt and
Sampler, a seed gives the same tokens whatever the chain length, prefill chunk or pipelining.
The token at position p is argmax_i(z_i + g_i) over the tokens that survive the filters, where
z = logits / temperature and g_i is Gumbel noise from Philox4x32-10 keyed by the seed and
counted by (i, p); nothing depends on how many tokens one submission ran.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

# Temperatures below this are greedy: logits / temperature would overflow float32 (or the
# temperature itself round to 0 on the device), and the argmax is what sampling then means.
MIN_TEMPERATURE = 2.0**-64


def check_sampling(temperature: float, top_k: int, top_p: float, min_p: float, seed: int) -> float:
    """Validates sampler settings (Sampler and ops.sample alike): ValueError naming the one out
    of range (NaN included). Returns the temperature the device uses: 0 (greedy) for one below
    MIN_TEMPERATURE."""
    for name, value in (("temperature", temperature), ("top_p", top_p), ("min_p", min_p)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
            raise ValueError(f"{name} must be a number, got {value!r}")
    if not (0.0 <= temperature < math.inf):
        raise ValueError(f"temperature must be >= 0 and finite (0: greedy), got {temperature}")
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 0 <= top_k < 2**32:
        raise ValueError(f"top_k must be an integer in [0, 2^32) (0: off), got {top_k!r}")
    if not (0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] (1: off), got {top_p}")
    if not (0.0 <= min_p <= 1.0):
        raise ValueError(f"min_p must be in [0, 1] (0: off), got {min_p}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2^64), got {seed!r}")
    return 0.0 if temperature < MIN_TEMPERATURE else float(temperature)


@dataclass(frozen=True)
class Sampler:
    """How the next token is chosen, on the GPU, at the end of every step.

    temperature 0 is greedy (the argmax, lowest id on ties), and so is one below
    MIN_TEMPERATURE (2^-64), where logits / temperature would overflow. Otherwise the logits are divided
    by the temperature and filtered in this order, each filter keeping ties at its threshold:
    top_k (the k most likely; 0: off), top_p (the smallest set of most likely tokens holding
    top_p of the remaining mass; 1: off), min_p (tokens at least min_p times as likely as the
    most likely; 0: off). seed keys the random numbers (64 bits)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0

    def __post_init__(self):
        # A temperature below MIN_TEMPERATURE is kept as 0: greedy, on every device.
        object.__setattr__(self, "temperature",
                           check_sampling(self.temperature, self.top_k, self.top_p, self.min_p, self.seed))

    @property
    def greedy(self) -> bool:
        """True when the argmax is taken (temperature 0, or below MIN_TEMPERATURE)."""
        return self.temperature == 0.0


@dataclass
class Piece:
    """One generated token: its id, the text it adds, its log-probability under the model's
    unfiltered distribution, and when it reached the caller."""
    token_id: int
    text: str
    logprob: float
    seconds: float  # since generate() started
    top_logprobs: list[tuple[int, float]] | None = None  # logprobs=N: the step's N most likely (id, logprob)


@dataclass
class Generation:
    """What generate(stream=False) returns: the text, its tokens, and the speeds."""
    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    stop_reason: str = ""          # "stop_token", "stop_string", "max_tokens" or "context"
    time_to_first_token: float = 0.0  # seconds: the prompt's prefill and the first sample
    decode_seconds: float = 0.0       # from the first token to the last
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)  # logprobs=N: per token
    prompt_logprobs: list[float | None] | None = None  # prompt_logprobs=True: [None, log p(p1 | p0), ...]
    prompt_top_logprobs: list | None = None  # prompt_logprobs=True and logprobs=N: [None, top-N pairs, ...]
    stop_token: tuple | None = None  # stop_reason "stop_token": (id, logprob, top-N pairs or None), not in the text
    acceptance_rate: float | None = None  # speculative decoding: the share of draft tokens accepted

    @property
    def tokens(self) -> list[int]:
        """The generated token ids: token_ids, under the name generate_batch's callers may use."""
        return self.token_ids

    @property
    def finish_reason(self) -> str:
        """Why it stopped: stop_reason, under the name generate_batch's callers may use."""
        return self.stop_reason

    @property
    def prompt_tokens_per_second(self) -> float:
        """Prompt tokens over the time to the first token."""
        return self.prompt_tokens / self.time_to_first_token if self.time_to_first_token > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after the first over the time from the first to the last."""
        n = len(self.token_ids) - 1  # tokens after the first
        return n / self.decode_seconds if n > 0 and self.decode_seconds > 0 else 0.0

    def __str__(self) -> str:
        return self.text

    def summary(self) -> str:
        """One line: prompt and decode speeds, time to first token, why it stopped."""
        if not self.token_ids and self.stop_reason == "stop_token":
            return (f"{self.prompt_tokens} prompt tokens at {self.prompt_tokens_per_second:.1f} tok/s; the first token "
                    "sampled was a stop token, so nothing was generated")
        return (f"{self.prompt_tokens} prompt tokens at {self.prompt_tokens_per_second:.1f} tok/s, "
                f"first token after {self.time_to_first_token * 1000:.1f} ms, {len(self.token_ids)} generated at "
                f"{self.decode_tokens_per_second:.1f} tok/s ({self.stop_reason})")


def stop_cut(text: str, stops, final: bool = False) -> tuple[int, bool]:
    """How much of a generation's `text` may be shown: (end, hit). hit: a stop string occurs,
    and `end` is where the first one starts. Else `end` holds back the longest tail of `text`
    that begins a stop string (the next token may complete it), unless `final` (no token follows)."""
    hits = [text.index(s) for s in stops if s in text]
    if hits:
        return min(hits), True
    if final:
        return len(text), False
    held = max((n for s in stops for n in range(min(len(s) - 1, len(text)), 0, -1) if text.endswith(s[:n])),
               default=0)
    return len(text) - held, False


class Stream:
    """What generate(stream=True) returns: iterate it for Pieces; `result` fills in as they
    arrive (the Generation that stream=False would have returned)."""

    def __init__(self, pieces, result: Generation):
        self._pieces = pieces
        self.result = result

    def __iter__(self):
        for p in self._pieces:
            self.result.text += p.text
            yield p

    def close(self) -> None:
        """Stops generating (the cache is rewound to the tokens fed back so far)."""
        self._pieces.close()
