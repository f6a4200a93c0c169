"""Which paths hold a Whisper model: an HF folder whose config.json says model_type "whisper",
a CTranslate2 folder (model.bin with a Whisper spec), or a whisper.cpp GGML file."""
from __future__ import annotations

import json
import os

GGML_MAGIC = b"lmgg"  # 0x67676d6c, little-endian


def _head(path, n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def whisper_format(path) -> str | None:
    """"hf", "ct2" or "ggml" for a Whisper model at path, else None."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return "ggml" if _head(path, 4) == GGML_MAGIC else None
    if not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, "model.bin")):
        return "ct2" if b"WhisperSpec" in _head(os.path.join(path, "model.bin"), 64) else None
    config = os.path.join(path, "config.json")
    try:
        with open(config, encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return "hf" if model_type == "whisper" else None
