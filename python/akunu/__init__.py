"""akunu: LLM inference on Vulkan compute, with the engine's buffers visible as NumPy arrays.

    >>> import akunu, numpy as np
    >>> dev = akunu.Device()                       # best device; AKUNU_DEVICE overrides
    >>> x = dev.upload(np.arange(5, dtype=np.float32))
    >>> x.numpy()                                  # a zero-copy view where memory is host-visible
    >>> m = akunu.load("model.gguf")               # an akunu.Model, or an akunu.Encoder for bert
    >>> w = akunu.load("whisper-tiny.en")          # an akunu.Whisper for a Whisper model
"""
from __future__ import annotations

import os as _os

if not _os.environ.get("XDG_RUNTIME_DIR"):
    # Mesa's drivers warn on every start without it; nothing of akunu's lives there.
    _os.environ["XDG_RUNTIME_DIR"] = "/tmp"

from akunu import hub, models, ops  # noqa: E402
from akunu._akunu import (  # noqa: E402
    Buffer,
    CommandList,
    Device,
    Error,
    ModelConfig,
    ModelFiles,
    arch_table,
    clear_validation_messages,
    devices,
    find_device,
    kernel_names,
    open_model,
    supported_architectures,
    validation_enabled,
    validation_messages,
)
from akunu._device import upload  # noqa: E402
from akunu._inputs import ContextWarning  # noqa: E402
from akunu.batch import Batch  # noqa: E402
from akunu.encoder import Encoder  # noqa: E402
from akunu.kv_cache import KVCache  # noqa: E402
from akunu.model import Model, _is_encoder, dequantize_kv  # noqa: E402
from akunu.plan import MemoryPlan, SplitPlan, load_config, plan  # noqa: E402
from akunu.profile_tables import kernel_statistics_table, profile_table  # noqa: E402
from akunu.sampling import Generation, Piece, Sampler, Stream  # noqa: E402
from akunu.tokenizer import StreamDecoder, Tokenizer  # noqa: E402
from akunu.whisper import Whisper  # noqa: E402
from akunu.whisper.files import whisper_format as _whisper_format  # noqa: E402

Device.upload = upload  # type: ignore[attr-defined]
for _public in (Error, ContextWarning):  # tracebacks and warnings name akunu.X, the name users catch
    _public.__module__ = "akunu"
del _public
open = open_model  # akunu.open(path): inspect a model file without loading it  # noqa: A001


def __getattr__(name: str):
    """akunu.distributed (evaluation sweeps on Ray) loads on first use, as akunu.distributed.map."""
    if name == "distributed":
        import importlib

        return importlib.import_module("akunu.distributed")
    raise AttributeError(f"module 'akunu' has no attribute {name!r}")


def load(path, gguf_file: str | None = None, revision: str | None = None, **kwargs) -> Model | Encoder | Whisper:
    """An akunu.Whisper for a Whisper model (an HF folder, a CTranslate2 folder or a
    whisper.cpp GGML file), an akunu.Encoder for an encoder's file (bert), else an akunu.Model,
    from the file's architecture alone; path may be a Hugging Face repo id (akunu.hub),
    gguf_file and revision as for akunu.Model; kwargs go to that class (context, device,
    kv_dtype, ... for a Model; device, batch_tokens for an Encoder; device, max_sequences for
    a Whisper)."""
    path = hub.resolve(path, gguf_file, revision)
    if _whisper_format(path):
        return Whisper(path, **kwargs)
    return (Encoder if _is_encoder(path)[0] else Model)(path, **kwargs)


__all__ = [
    "Model",
    "Batch",
    "KVCache",
    "Encoder",
    "Whisper",
    "load",
    "profile_table",
    "kernel_statistics_table",
    "dequantize_kv",
    "Sampler",
    "Generation",
    "Piece",
    "Stream",
    "StreamDecoder",
    "Tokenizer",
    "MemoryPlan",
    "SplitPlan",
    "ModelConfig",
    "ModelFiles",
    "arch_table",
    "load_config",
    "plan",
    "supported_architectures",
    "Buffer",
    "CommandList",
    "Device",
    "Error",
    "ContextWarning",
    "clear_validation_messages",
    "devices",
    "find_device",
    "kernel_names",
    "open",
    "open_model",
    "models",
    "hub",
    "ops",
    "validation_enabled",
    "validation_messages",
]
__version__ = "0.1.0"
