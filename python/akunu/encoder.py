"""akunu.Encoder: an embedding model (a BERT-style encoder) that turns texts into vectors.

    e = akunu.Encoder("bge-small/")                # HF safetensors or llama.cpp GGUF
    vectors = e.embed(["first text", "second"])    # [2, dim] float32, L2-normalized rows
    e.embed(texts, pooling="cls", normalize=False, max_tokens=128)   # override the defaults
    m = akunu.load(path)                           # an Encoder or a Model, as the file says

An encoder has no KV cache, logits or generation: those are akunu.Model's, for causal language
models. Each class refuses the other's files with an error that names the right one.

A sentence-transformers directory sets embed()'s defaults (pooling, normalization, the length
texts are cut to), so that embed() returns what SentenceTransformer.encode() does;
Encoder.embed_settings shows them and embed()'s arguments override them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from akunu import _akunu, _progress, hub
from akunu.model import _is_encoder
from akunu.sentence_config import SUPPORTED_POOLING, EmbedSettings, read_embed_settings
from akunu.tokenizer import Tokenizer


class Encoder:
    """A loaded encoder (bert): its tokenizer and the recorded forward pass over a batch of
    texts, which embed() replays."""

    def __init__(self, path, device: str | int | dict | None = None, progress: bool | None = None,
                 batch_tokens: int = 0, tuning: dict | str | None = None, gguf_file: str | None = None,
                 revision: str | None = None):
        """path, gguf_file, revision: as for akunu.Model (a file, a folder or a Hugging Face repo id).
        device: as for akunu.Model (an entry of akunu.devices() or its index, part of a
        device's name, "vulkan" or "cpu"; None: AKUNU_DEVICE, else the default: akunu.find_device()).
        batch_tokens: the token rows embed() packs texts into per GPU submission (0:
        max(512, the model's max positions)). A causal language model raises akunu.Error
        naming akunu.Model.
        tuning: settings over AKUNU_TUNE, as for akunu.Model."""
        path = hub.resolve(path, gguf_file, revision)
        encoder, arch = _is_encoder(path)
        if not encoder:
            raise _akunu.Error(f"{path}: {arch} is a causal language model, not an encoder: load it with "
                               f"akunu.Model({path!r}) (or akunu.load({path!r}), which picks the class from the file)")
        self.path = path
        bar = _progress.LoadBar(progress)
        if isinstance(device, dict):  # an entry of akunu.devices()
            device = device["index"]
        device = "" if device is None else str(device)
        self._encoder = _akunu.Encoder(path, device, bar, int(batch_tokens), tuning)
        bar.close()
        self.tokenizer = Tokenizer.from_file(path)
        self.embed_settings: EmbedSettings = read_embed_settings(path)
        """embed()'s defaults: from sentence-transformers' files beside the model
        (sentence_bert_config.json, modules.json, the Pooling module's config), else mean
        pooling, L2-normalized rows and no cut (see EmbedSettings)."""

    # ---- text ----------------------------------------------------------------------------------
    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`, with the model's template ([CLS] ... [SEP]) unless told not to."""
        return self.tokenizer.encode(text, add_special_tokens)

    def detokenize(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of token ids."""
        return self.tokenizer.decode(ids, skip_special_tokens)

    # ---- embeddings ----------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], pooling: str | None = None, normalize: bool | None = None,
              truncate: bool | None = None, max_tokens: int | None = None) -> np.ndarray:
        """Embeddings of `texts`: a new [len(texts), dim] float32 array.

        Each text is tokenized with the model's template ([CLS] ... [SEP]) and run through the
        encoder; pooling="mean" averages its token rows (the attention-mask mean of
        sentence-transformers), pooling="cls" takes the [CLS] row; normalize=True divides each
        row by its L2 norm. Texts are packed back to back into batches of batch_tokens token
        rows with attention kept inside each text, so a text's embedding does not depend on
        the others in the call.

        Arguments left as None take embed_settings: a sentence-transformers model's own
        (its Pooling module, whether it has a Normalize module, and sentence_bert_config.json's
        max_seq_length and do_lower_case), so that the result equals
        SentenceTransformer.encode(); else mean pooling and normalized rows.

        max_tokens: the most tokens a text may have, special tokens included (None: the
        settings' max_seq_length, else the model's max positions; it cannot exceed those).
        A longer text keeps its first max_tokens - 1 tokens and its final special token
        ([SEP]), as transformers' truncation does, when truncate is True (the default where
        the settings give a max_seq_length, as sentence-transformers cuts); with
        truncate=False it raises ValueError. An empty list, a non-string, or an unknown
        pooling raise TypeError or ValueError."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("embed takes a list of strings; wrap a single text in a list")
        texts = list(texts)
        if not texts:
            raise ValueError("embed needs at least one text")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is a {type(t).__name__}, not a str")
        settings = self.embed_settings
        pooling = settings.pooling if pooling is None else pooling
        if pooling not in SUPPORTED_POOLING:
            raise ValueError(f"pooling must be 'mean' or 'cls', not {pooling!r}"
                             + (f" (from {settings.source})" if pooling == settings.pooling else ""))
        normalize = settings.normalize if normalize is None else normalize
        truncate = (settings.max_tokens is not None) if truncate is None else truncate
        limit = self._token_limit(max_tokens)
        ids = self.tokenizer.encode_batch([t.lower() for t in texts] if settings.lowercase else texts)
        for i, row in enumerate(ids):
            if len(row) <= limit:
                continue
            if not truncate:
                raise ValueError(f"texts[{i}] has {len(row)} tokens; {self.config.architecture} takes at most "
                                 f"{limit} ({self._limit_source(max_tokens)}); pass truncate=True to cut it")
            ids[i] = row[:limit - 1] + row[-1:] if self.tokenizer.is_special(row[-1]) else row[:limit]
        return self._encoder.embed(ids, getattr(_akunu.Pooling, pooling), bool(normalize))

    def _limit_source(self, max_tokens: int | None) -> str:
        if max_tokens is not None:
            return "max_tokens"
        if self.embed_settings.max_tokens is not None and self.embed_settings.max_tokens < self.max_tokens:
            return "sentence_bert_config.json's max_seq_length"
        return "its max positions"

    def _token_limit(self, max_tokens: int | None) -> int:
        positions = self.max_tokens
        if max_tokens is None:
            return min(self.embed_settings.max_tokens or positions, positions)
        if not isinstance(max_tokens, int) or not 2 <= max_tokens <= positions:
            raise ValueError(f"max_tokens must be an integer from 2 to {positions} (the model's max positions), "
                             f"not {max_tokens!r}")
        return max_tokens

    # ---- settings ------------------------------------------------------------------------------
    @property
    def config(self):
        """The ModelConfig: shapes, architecture and norm settings."""
        return self._encoder.config

    @property
    def device(self) -> _akunu.Device:
        """The akunu.Device the encoder runs on, as for Model.device."""
        return self._encoder.device

    @property
    def max_tokens(self) -> int:
        """The most tokens one text may have, special tokens included (the model's max positions)."""
        return self._encoder.max_tokens

    @property
    def batch_tokens(self) -> int:
        """The token rows embed() runs per GPU submission."""
        return self._encoder.batch_tokens

    # ---- inspection ----------------------------------------------------------------------------
    def dispatch_table(self) -> list[dict]:
        """The recorded forward pass over a batch: label, kernel, spec, groups and bindings, as
        Model.dispatch_table() describes them."""
        return self._encoder.dispatch_table()

    def kernel_statistics(self) -> list[dict]:
        """What the driver compiled the kernels to, as Model.kernel_statistics() describes it."""
        return self._encoder.kernel_statistics()

    def __repr__(self) -> str:
        return (f"Encoder({self.path!r}, {self.config.architecture}, max_tokens={self.max_tokens}, "
                f"batch_tokens={self.batch_tokens}, device={self.device.name!r})")
