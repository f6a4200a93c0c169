"""From OpenAI requests to akunu generations, and from generations to OpenAI's response and
stream-chunk objects (completions and chat completions).

One request becomes one job: its choices (prompts x n) run one after another on the model the
pool lends it, and the job yields (choice index, Piece) as tokens arrive and (choice index,
Generation) when a choice ends; with echo, (choice index, Echo) comes first, once the prompt's
logprobs are known. Choice k of a prompt samples with seed + k, as generate(n=) does.
"""
from __future__ import annotations

import itertools
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from akunu.controls import chat_logprobs, completion_logprobs
from akunu.sampling import Generation, Sampler

MAX_CHOICES = 64  # prompts x n of one request: every choice runs on the one model the request holds
FINISH = {"stop_token": "stop", "stop_string": "stop", "max_tokens": "length", "context": "length"}


class Echo(NamedTuple):
    """A choice's prompt, for a stream with echo: its Generation, with the prompt's logprobs."""

    result: Generation


class RequestError(ValueError):
    """A request the server refuses: status code, message, and the field at fault."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


@dataclass
class Plan:
    """What a request asks for, resolved: the prompts' token ids and generate()'s arguments."""

    prompts: list[list[int]]
    n: int
    max_tokens: int
    sampler: Sampler
    kwargs: dict = field(default_factory=dict)   # stop, penalties, logit_bias, logprobs, processors
    logprobs: int | None = None                   # None: no logprobs object in the response
    chat: bool = False
    make_processors: object = None                # () -> [logits processor], fresh for every choice
    echo: list[str] | None = None                 # completions with echo: each prompt's text


def plan(req, prompts: list[list[int]], context: int, cap: int, default_max: int, make_processors=None,
         echo: list[str] | None = None) -> Plan:
    """The Plan of a completion or chat request; RequestError for what the model cannot do.
    make_processors: None, or a function that returns the logits processors of one choice
    (response_format's grammar, which follows one sequence)."""
    for i, ids in enumerate(prompts):
        if not ids:
            raise RequestError(f"prompt {i} is empty", "prompt")
        if len(ids) >= context:
            raise RequestError(f"prompt {i} has {len(ids)} tokens; the model's context is {context}, which must also "
                               "hold at least one generated token", "prompt", code="context_length_exceeded")
    if len(prompts) * req.n > MAX_CHOICES:
        raise RequestError(f"{len(prompts)} prompts x n={req.n} is {len(prompts) * req.n} choices; this server "
                           f"takes up to {MAX_CHOICES} in one request", "n")
    asked = getattr(req, "max_completion_tokens", None) or req.max_tokens
    if asked is not None and asked > cap:
        raise RequestError(f"max_tokens {asked} is above this server's cap of {cap} (akunu serve --max-tokens-cap)",
                           "max_tokens")
    chat = hasattr(req, "messages")
    logprobs = (req.top_logprobs or 0) if chat and req.logprobs else (None if chat else req.logprobs)
    seed = req.seed if req.seed is not None else random.getrandbits(63)
    kwargs = dict(stop=req.stop, repetition_penalty=req.repetition_penalty, presence_penalty=req.presence_penalty,
                  frequency_penalty=req.frequency_penalty,
                  logit_bias={int(k): v for k, v in (req.logit_bias or {}).items()},
                  logprobs=logprobs or 0, prompt_logprobs=echo is not None and logprobs is not None)
    sampler = Sampler(temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, min_p=req.min_p, seed=seed)
    return Plan(prompts, req.n, asked or default_max, sampler, kwargs, logprobs, chat, make_processors, echo)


def job(p: Plan, on_token=lambda: None):
    """The request's generations, for ModelPool.stream: yields (index, Piece) and (index,
    Generation); on_token() is called for every token generated (the server's count)."""
    def run(model, cancel):
        index = 0
        for ids in p.prompts:
            for k in range(p.n):
                if cancel.is_set():
                    return
                sampler = Sampler(p.sampler.temperature, p.sampler.top_k, p.sampler.top_p, p.sampler.min_p,
                                  (p.sampler.seed + k) % 2**64)
                processors = p.make_processors() if p.make_processors else None
                stream = model.generate(ids, p.max_tokens, sampler, stream=True, logits_processors=processors,
                                        **p.kwargs)
                try:
                    pieces = iter(stream)
                    first = next(pieces, None)  # runs the prompt (and its logprobs, for echo)
                    if p.echo is not None:
                        yield index, Echo(stream.result)
                    for piece in itertools.chain([first] if first is not None else [], pieces):
                        on_token()
                        yield index, piece
                        if cancel.is_set():
                            return
                finally:
                    stream.close()
                yield index, stream.result
                index += 1
    return run


def _logprobs(tokenizer, p: Plan, g: Generation, prompt: list[int]):
    if p.logprobs is None:
        return None
    tops = g.top_logprobs if p.logprobs > 0 else ([[]] * len(g.token_ids) if p.chat else None)
    if p.chat:
        return chat_logprobs(tokenizer, g.token_ids, g.logprobs, tops)
    if p.echo is None:
        return completion_logprobs(tokenizer, g.token_ids, g.logprobs, tops)
    # echo: the prompt's tokens first, the first one without a logprob, and a stop token last
    # (as OpenAI returns them; lm_eval's local-completions reads the prompt's by position)
    ids, logprobs = prompt + g.token_ids, g.prompt_logprobs + g.logprobs
    tops = None if tops is None else g.prompt_top_logprobs + tops
    if g.stop_token is not None:
        token, logprob, top = g.stop_token
        ids, logprobs = ids + [token], logprobs + [logprob]
        tops = None if tops is None else tops + [top or []]
    return completion_logprobs(tokenizer, ids, logprobs, tops)


def usage(p: Plan, results: list[Generation]) -> dict:
    """Token counts: each prompt once (as OpenAI counts them with n > 1), every choice's reply."""
    prompt = sum(len(ids) for ids in p.prompts)
    completion = sum(len(g.token_ids) for g in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def response(tokenizer, p: Plan, model_name: str, results: dict[int, Generation]) -> dict:
    """The whole response of a request that did not stream."""
    choices = []
    for index in sorted(results):
        g, prompt = results[index], index // p.n
        choice = {"index": index, "logprobs": _logprobs(tokenizer, p, g, p.prompts[prompt]),
                  "finish_reason": FINISH[g.stop_reason]}
        if p.chat:
            choice["message"] = {"role": "assistant", "content": g.text}
        else:
            choice["text"] = (p.echo[prompt] if p.echo is not None else "") + g.text
        choices.append(choice)
    head = _head(p, model_name)
    head.update(choices=choices, usage=usage(p, list(results.values())))
    return head


def _head(p: Plan, model_name: str, chunk: bool = False) -> dict:
    kind = ("chat.completion.chunk" if chunk else "chat.completion") if p.chat else "text_completion"
    prefix = "chatcmpl-" if p.chat else "cmpl-"
    return {"id": prefix + uuid.uuid4().hex[:24], "object": kind, "created": int(time.time()), "model": model_name}


class Chunks:
    """The stream's chunk objects, one request: start() (chat: the role), piece(), end()."""

    def __init__(self, tokenizer, p: Plan, model_name: str, include_usage: bool):
        self.t, self.p, self.head = tokenizer, p, _head(p, model_name, chunk=True)
        self.include_usage = include_usage
        self.offsets: dict[int, int] = {}  # completions: the characters of a choice's text so far
        self.shown: dict[int, int] = {}    # the characters of a choice's generated text so far

    def _chunk(self, choices, **extra) -> dict:
        return dict(self.head, choices=choices, **extra)

    def start(self) -> list[dict]:
        if not self.p.chat:
            return []
        n = len(self.p.prompts) * self.p.n
        return [self._chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                              "finish_reason": None} for i in range(n)])]

    def echo(self, index: int, e: Echo) -> dict:
        """A completion's prompt text first (and with logprobs its tokens', the first without)."""
        prompt = index // self.p.n
        choice = {"index": index, "text": self.p.echo[prompt], "finish_reason": None, "logprobs": None}
        if self.p.logprobs is not None:
            tops = e.result.prompt_top_logprobs if self.p.logprobs else None
            choice["logprobs"] = completion_logprobs(self.t, self.p.prompts[prompt], e.result.prompt_logprobs, tops)
        self.offsets[index] = len(choice["text"])
        return self._chunk([choice])

    def piece(self, index: int, piece) -> dict:
        tops = [piece.top_logprobs or []] if self.p.logprobs else None
        choice = {"index": index, "finish_reason": None, "logprobs": None}
        if self.p.chat:
            choice["delta"] = {"content": piece.text}
            if self.p.logprobs is not None:
                choice["logprobs"] = chat_logprobs(self.t, [piece.token_id], [piece.logprob], tops)
        else:
            choice["text"] = piece.text
            at = self.offsets.get(index, 0)
            if self.p.logprobs is not None:
                choice["logprobs"] = completion_logprobs(self.t, [piece.token_id], [piece.logprob], tops, at)
            self.offsets[index] = at + len(piece.text)
        self.shown[index] = self.shown.get(index, 0) + len(piece.text)
        return self._chunk([choice])

    def end(self, index: int, g: Generation) -> dict:
        """A choice's finish, with the text its pieces held back (what began a stop string that
        a stop token then cut short)."""
        rest = g.text[self.shown.get(index, 0):]
        choice = {"index": index, "finish_reason": FINISH[g.stop_reason], "logprobs": None}
        choice.update(({"delta": {"content": rest}} if rest else {"delta": {}}) if self.p.chat else {"text": rest})
        return self._chunk([choice])

    def usage(self, results: list[Generation]) -> list[dict]:
        return [self._chunk([], usage=usage(self.p, results))] if self.include_usage else []
