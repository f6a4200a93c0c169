"""The OpenAI-compatible HTTP server: a FastAPI app over one model (akunu serve MODEL).

Endpoints: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (both with
server-sent-event streaming) and POST /v1/embeddings. Safety: the CLI binds to 127.0.0.1
unless told otherwise; with an API key every request needs "Authorization: Bearer KEY"; bodies
above max_request_bytes (or without a Content-Length) are refused before they are read;
max_tokens is capped; malformed requests get a 4xx with OpenAI's error object naming the field;
a client that goes away stops its generation at the next token and frees the model.
"""
from __future__ import annotations

import asyncio
import base64
import hmac
import json
import threading
import time

from fastapi import FastAPI, Request  # the handlers' annotations are resolved from this module
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from akunu._akunu import Error
from akunu.sampling import Generation
from akunu.server import openai_api
from akunu.server.batcher import Batcher, batchable
from akunu.server.openai_api import RequestError
from akunu.server.pool import ModelPool
from akunu.server.schemas import ChatRequest, CompletionRequest, EmbeddingRequest, message_text


def error_body(message: str, kind: str = "invalid_request_error", param=None, code=None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class Guard:
    """ASGI middleware in front of everything: the body size limit and the API key."""

    def __init__(self, app, api_key: str | None, max_request_bytes: int):
        self.app, self.api_key, self.limit = app, api_key, max_request_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, body = refusal
            data = json.dumps(body).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            return await send({"type": "http.response.body", "body": data})
        return await self.app(scope, receive, send)

    def _refusal(self, scope, headers):
        if self.api_key is not None:
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
                return 401, error_body("a valid API key is needed: send 'Authorization: Bearer KEY'",
                                       "authentication_error", code="invalid_api_key")
        if scope["method"] in ("POST", "PUT", "PATCH"):
            length = headers.get(b"content-length")
            if length is None:
                return 411, error_body("a request body needs a Content-Length header")
            if not length.isdigit() or int(length) > self.limit:
                return 413, error_body(f"the request body ({length.decode()} bytes) is above this server's limit of "
                                       f"{self.limit} bytes (akunu serve --max-request-bytes)")
        return None


def create_app(model, model_name: str, api_key: str | None = None, parallel: int = 1, max_tokens_cap: int = 4096,
               max_request_bytes: int = 1 << 20, constraints=None, chat_template: str | None = None, batch: int = 0):
    """The ASGI app serving `model` (an akunu.Model, or an akunu.Encoder for embeddings only) as
    `model_name`; batch: sequences decoded together in one akunu.Batch (continuous batching;
    0: none, every request takes the solo path); parallel: solo requests run at once (the model
    and parallel - 1 forks of it);
    chat_template: a Jinja2 template in place of the model's own; constraints: the factory of
    response_format's logits processors (akunu.constrained)."""
    app = FastAPI(title="akunu", docs_url=None, redoc_url=None)
    generates = hasattr(model, "generate")
    lock = threading.Lock() if batch and generates else None
    pool = ModelPool(model, parallel, lock)
    batcher = Batcher(model, batch, lock) if lock is not None else None
    tokens = [0]  # generated since the start, for /health

    def count():
        tokens[0] += 1

    @app.exception_handler(RequestError)
    async def _refused(_, e: RequestError):
        return JSONResponse(error_body(str(e), param=e.param, code=e.code), status_code=e.status)

    @app.exception_handler(RequestValidationError)
    async def _malformed(_, e: RequestValidationError):
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return JSONResponse(error_body(f"{where or 'body'}: {first.get('msg')}", param=where or None), status_code=400)

    @app.exception_handler(Error)
    async def _engine_refused(_, e: Error):
        return JSONResponse(error_body(str(e)), status_code=400)

    def check_model(name: str, needs_generation: bool):
        if name != model_name:
            raise RequestError(f"the model {name!r} is not served here; this server serves {model_name!r}", "model",
                               404, "model_not_found")
        if needs_generation and not generates:
            raise RequestError(f"{model_name} is an encoder: it serves /v1/embeddings only", "model")

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": int(time.time()),
                                            "owned_by": "akunu"}]}

    @app.get("/health")
    async def health():
        out = {"status": "ok", "models": len(pool.models), "idle": pool.idle, "generated_tokens": tokens[0]}
        if batcher is not None:
            out["batch"] = batcher.stats()
        return out

    async def run(p: openai_api.Plan, req, request: Request):
        if batcher is not None and batchable(p):
            agen = batcher.stream(p, count)
        else:
            agen = pool.stream(openai_api.job(p, count))
        tokenizer = model.tokenizer
        if not req.stream:
            results = await _collect(agen, request)
            if results is None:  # the client went away
                return JSONResponse(error_body("client closed the request"), status_code=499)
            return openai_api.response(tokenizer, p, model_name, results)
        first = await _first(agen)
        chunks = openai_api.Chunks(tokenizer, p, model_name, bool((req.stream_options or {}).get("include_usage")))
        return StreamingResponse(_sse(agen, first, chunks), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request):
        check_model(req.model, True)
        if req.suffix:
            raise RequestError("suffix (text after the insertion, fill-in-the-middle) is not supported: send the "
                               "prompt alone, or a prompt in the model's own infill format", "suffix")
        prompts = _prompts(model, req.prompt)
        processors = _processors(constraints, model, req.response_format)
        echo = _echo_texts(model, req.prompt, prompts) if req.echo else None
        return await run(openai_api.plan(req, prompts, model.context, max_tokens_cap, 16, processors, echo), req,
                         request)

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest, request: Request):
        check_model(req.model, True)
        try:
            messages = [message_text(m) for m in req.messages]
        except ValueError as e:
            raise RequestError(str(e), "messages") from None
        ids = model.tokenizer.apply_chat_template(messages, add_generation_prompt=True, chat_template=chat_template)
        processors = _processors(constraints, model, req.response_format)
        default = max(1, min(max_tokens_cap, model.context - len(ids)))
        return await run(openai_api.plan(req, [ids], model.context, max_tokens_cap, default, processors), req, request)

    @app.post("/v1/embeddings")
    async def embeddings(req: EmbeddingRequest):
        check_model(req.model, False)
        texts = [req.input] if isinstance(req.input, str) else list(req.input)
        pooling = {} if req.pooling is None else {"pooling": req.pooling}
        try:
            vectors = await pool.run(lambda m: m.embed(texts, **pooling))
        except ValueError as e:
            raise RequestError(str(e), "input") from None
        tokens = sum(len(model.tokenize(t)) for t in texts)
        if req.encoding_format == "base64":  # what the openai client asks for by default
            rows = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
        else:
            rows = [v.tolist() for v in vectors]
        return {"object": "list", "model": model_name,
                "data": [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    return Guard(app, api_key, max_request_bytes)


def _prompts(model, prompt) -> list[list[int]]:
    """A completion's prompts as token ids: a string, a list of strings, token ids or lists of them."""
    if isinstance(prompt, str):
        return [model.tokenize(prompt)]
    if all(isinstance(x, int) for x in prompt):
        prompts = [list(prompt)]
    elif all(isinstance(x, str) for x in prompt):
        return [model.tokenize(x) for x in prompt]
    else:
        prompts = [list(x) for x in prompt]
    vocab = model.config.vocab_size
    for i, ids in enumerate(prompts):
        bad = next((t for t in ids if not 0 <= t < vocab), None)
        if bad is not None:
            raise RequestError(f"prompt {i}: token id {bad} is outside the vocabulary [0, {vocab})", "prompt")
    return prompts


def _echo_texts(model, prompt, prompts: list[list[int]]) -> list[str]:
    """The prompts' text for echo: as sent, or the decoded token ids."""
    if isinstance(prompt, str):
        return [prompt]
    if all(isinstance(x, str) for x in prompt):
        return list(prompt)
    return [model.detokenize(ids) for ids in prompts]


def _processors(constraints, model, response_format):
    """None, or the function that makes a choice's logits processors for a response_format
    (JSON mode, a JSON schema); the format is checked here, so a bad one gets a 400."""
    if not response_format or response_format.get("type") == "text":
        return None
    if constraints is None:
        raise RequestError("response_format needs constrained decoding (pip install llguidance)", "response_format")
    try:
        constraints(model, response_format)
    except (ValueError, Error) as e:
        raise RequestError(str(e), "response_format") from None
    return lambda: [constraints(model, response_format)]


async def _first(agen):
    """The first item of a stream, so that a request that fails at once gets a 4xx, not a
    stream that ends in an error."""
    try:
        return await agen.__anext__()
    except (ValueError, TypeError) as e:
        raise RequestError(str(e)) from None


async def _collect(agen, request) -> dict | None:
    """Every choice's Generation of a request that does not stream, or None when the client
    disconnected first (the generation is then stopped)."""
    results = {}

    async def consume():
        try:
            async for index, item in agen:
                if isinstance(item, Generation):
                    results[index] = item
        except (ValueError, TypeError) as e:
            raise RequestError(str(e)) from None

    async def watch():
        while not await request.is_disconnected():
            await asyncio.sleep(0.25)

    work, watcher = asyncio.ensure_future(consume()), asyncio.ensure_future(watch())
    done, _ = await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if work in done:
        watcher.cancel()
        work.result()
        return results
    work.cancel()
    await asyncio.gather(work, return_exceptions=True)
    return None


async def _sse(agen, first, chunks: openai_api.Chunks):
    """Server-sent events: data: {chunk} per token, a finishing chunk per choice, data: [DONE]."""
    results = []

    def event(obj) -> str:
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

    for c in chunks.start():
        yield event(c)
    item = first
    try:
        while True:
            index, thing = item
            if hasattr(thing, "token_id"):
                yield event(chunks.piece(index, thing))
            elif isinstance(thing, openai_api.Echo):
                yield event(chunks.echo(index, thing))
            else:
                results.append(thing)
                yield event(chunks.end(index, thing))
            item = await agen.__anext__()
    except StopAsyncIteration:
        pass
    except (ValueError, TypeError, Error) as e:
        yield event(error_body(str(e)))
    finally:
        await agen.aclose()
    for c in chunks.usage(results):
        yield event(c)
    yield "data: [DONE]\n\n"
