"""akunu's OpenAI-compatible server (akunu serve MODEL): FastAPI on uvicorn, one model served
to many clients, requests queued onto the model and its forks (docs/server.md).

    python -m akunu serve HuggingFaceTB/SmolLM2-135M-Instruct --port 8000
    client = openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")

fastapi and uvicorn are optional dependencies: everything else in akunu works without them.
"""
from __future__ import annotations

from akunu.server.app import create_app


def serve(model, model_name: str, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          **app_kwargs) -> None:
    """Serves `model` (a loaded akunu.Model or akunu.Encoder) until interrupted; app_kwargs go to
    create_app (api_key, parallel, max_tokens_cap, max_request_bytes)."""
    try:
        import uvicorn
    except ImportError:
        raise ImportError("akunu serve needs fastapi and uvicorn: pip install fastapi uvicorn") from None
    uvicorn.run(create_app(model, model_name, **app_kwargs), host=host, port=port, log_level=log_level)


__all__ = ["create_app", "serve"]
