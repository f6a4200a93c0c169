"""The request bodies of the OpenAI-compatible endpoints, as pydantic models.

Fields follow OpenAI's API reference (and llama-cpp-python / vLLM's extensions top_k, min_p,
repetition_penalty); fields a client sends that akunu does not use (user, service_tier, ...)
are ignored. A body that does not fit raises pydantic's ValidationError, which the app turns
into a 400 naming the field.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_TOP_LOGPROBS = 20
MAX_STOP_CHARS = 256  # every token's text is searched for each stop string's beginnings


class Sampling(BaseModel):
    """What completions and chat completions share."""

    model_config = ConfigDict(extra="ignore")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0, lt=2**64)
    n: int = Field(default=1, ge=1, le=16)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    repetition_penalty: float = Field(default=1.0, gt=0.0)
    logit_bias: dict[str, float] | None = None
    response_format: dict[str, Any] | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, v):
        stops = [v] if isinstance(v, str) else list(v or [])
        if len(stops) > 4 or any(not s for s in stops):
            raise ValueError("stop takes up to 4 non-empty strings")
        if any(len(s) > MAX_STOP_CHARS for s in stops):
            raise ValueError(f"a stop string has up to {MAX_STOP_CHARS} characters")
        return stops

    @field_validator("logit_bias")
    @classmethod
    def _bias(cls, v):
        out = {}
        for key, bias in (v or {}).items():
            if not key.lstrip("-").isdigit():
                raise ValueError(f"logit_bias keys are token ids, got {key!r}")
            if not -100.0 <= bias <= 100.0:
                raise ValueError(f"logit_bias[{key}] = {bias}: biases lie in [-100, 100]")
            out[key] = bias
        return out


class CompletionRequest(Sampling):
    """POST /v1/completions."""

    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    suffix: str | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, v):
        if isinstance(v, list) and not v:
            raise ValueError("prompt is an empty list")
        return v


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(Sampling):
    """POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    max_completion_tokens: int | None = Field(default=None, ge=1)


class EmbeddingRequest(BaseModel):
    """POST /v1/embeddings."""

    model_config = ConfigDict(extra="ignore")

    model: str
    input: str | list[str] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] = "float"  # base64: little-endian float32 bytes
    pooling: Literal["mean", "cls", "last"] | None = None  # akunu's extension


def message_text(message: ChatMessage) -> dict:
    """A message as chat templates take it: content parts of type text joined into one string."""
    out = message.model_dump(exclude_none=True)
    if isinstance(message.content, list):
        texts = []
        for i, part in enumerate(message.content):
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"content part {i}: only text parts are supported, got type {part.get('type')!r}")
            texts.append(part["text"])
        out["content"] = "".join(texts)
    out.setdefault("content", "")
    return out
