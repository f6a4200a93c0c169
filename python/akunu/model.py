"""akunu.Model: load a model and run it, with its insides visible as NumPy arrays.

    m = akunu.Model("model.gguf", context=2048)
    logits = m.eval(m.tokenize("def fib(n):"))     # a view of the logits scratch buffer
    for piece in m.generate("def fib(n):", max_tokens=32):
        print(piece.text, end="")
    m.kv_cache.k(0)                                # [n_kv_heads, length, head_dim] f16 view
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from akunu import _akunu
from akunu.tokenizer import Tokenizer


@dataclass
class Piece:
    """One generated token: its id, the text it adds, and when it arrived."""
    token_id: int
    text: str
    seconds: float  # since generate() started


class KVCacheView:
    """The model's KV cache. k(layer)/v(layer) are [n_kv_heads, current_length, head_dim] f16
    views (copies where the device memory is not host-visible)."""

    def __init__(self, engine):
        self._e = engine

    @property
    def current_length(self) -> int:
        return self._e.kv_length

    @property
    def max_length(self) -> int:
        return self._e.context

    def k(self, layer: int) -> np.ndarray:
        return self._e.kv_view(layer, False)[:, : self.current_length, :]

    def v(self, layer: int) -> np.ndarray:
        return self._e.kv_view(layer, True)[:, : self.current_length, :]

    def reset(self) -> None:
        self._e.reset()

    def truncate(self, n: int) -> None:
        """Rewinds to the first n positions."""
        self._e.truncate(n)


class ScratchView:
    """The named scratch buffers (h0, h1, residual, qkv, attn_out, ffn_*, logits, ...) as views."""

    def __init__(self, engine):
        self._e = engine

    def names(self) -> list[str]:
        return list(self._e.scratch_names)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._e.scratch_view(name)

    def __repr__(self) -> str:
        return f"ScratchView({', '.join(self.names())})"


class Model:
    def __init__(self, path, context: int = 4096, device: str | int | None = None, progress: bool | None = None,
                 chain: int = 0, prefill_chunk: int = 0):
        """chain: decode steps per GPU submission (0: chosen from the device profile).
        prefill_chunk: prompt tokens per prefill submission (0: 512)."""
        path = os.fspath(path)
        self.path = path
        bar = _progress_bar() if (progress if progress is not None else sys.stderr.isatty()) else None
        # The engine validates and plans the model before it allocates anything; the tokenizer
        # comes after (seed stage 11), so a model that does not fit fails first.
        self._engine = _akunu.Engine(path, context, "" if device is None else str(device), bar, chain, prefill_chunk)
        if bar is not None:
            bar.close()
        self.tokenizer = Tokenizer.from_file(path)
        self.kv_cache = KVCacheView(self._engine)
        self.scratch = ScratchView(self._engine)

    # ---- text ----------------------------------------------------------------------------------
    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens)

    def detokenize(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens)

    # ---- running -------------------------------------------------------------------------------
    @property
    def config(self):
        return self._engine.config

    @property
    def context(self) -> int:
        return self._engine.context

    def eval(self, ids: Sequence[int], all_logits: bool = False) -> np.ndarray:
        """Runs `ids` after what the cache holds, in batched prefill chunks. Returns the last
        position's logits (a view of the logits scratch buffer, which the next step
        overwrites) or, with all_logits=True, a new [len(ids), vocab] float32 array of every
        position's logits. A prompt longer than the free context raises and changes nothing."""
        ids = [int(i) for i in ids]
        if all_logits:
            return self._engine.eval(ids, True)
        self._engine.eval(ids)
        return self.scratch["logits"]

    def generate(self, prompt: str | Sequence[int], max_tokens: int = 128, stop: Sequence[str] | None = None,
                 stream: bool = True, reset: bool = True):
        """Greedy generation. stream=True yields Piece objects as tokens arrive; stream=False
        returns the text. Generation ends at max_tokens, a stop token, or a `stop` string."""
        pieces = self._generate(prompt, max_tokens, stop or [], reset)
        return pieces if stream else "".join(p.text for p in pieces)

    def _sampled(self) -> Iterator[tuple[int, int]]:
        """Greedy tokens after what the cache holds, each with the cache length that excludes
        it: the length to rewind to if generation ends at that token. Chains run `chain` steps
        per submission, each embedding the id the previous step sampled; single steps are used
        where a whole chain no longer fits the context."""
        e = self._engine
        pending = e.argmax_token()  # sampled, not yet fed to the model
        while True:
            yield pending, e.kv_length
            if e.kv_length >= self.context:
                return
            if e.chain > 1 and e.kv_length + e.chain <= self.context:
                base = e.kv_length
                sampled = e.decode_chain(pending)  # fed: pending, sampled[0 .. chain-2]
                for k, token in enumerate(sampled[:-1]):
                    yield token, base + k + 1
                pending = sampled[-1]
            else:
                e.decode(pending)
                pending = e.argmax_token()

    def _generate(self, prompt, max_tokens, stop, reset) -> Iterator[Piece]:
        """A stop token or string ends generation at exactly that token, and the cache is
        rewound past the steps a chain ran after it."""
        if reset:
            self.reset()
        ids = self.tokenize(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
        start = time.perf_counter()
        self._engine.eval(ids)
        decoder = self.tokenizer.stream(skip_special_tokens=True)
        stop_ids = set(self.tokenizer.stop_ids)
        text = ""
        for produced, (token, keep) in enumerate(self._sampled(), 1):
            if token in stop_ids:
                self._engine.truncate(keep)
                return
            piece = decoder.put(token)
            text += piece
            hit = next((s for s in stop if s in text), None)
            if hit is not None:  # emit only what precedes the stop string
                self._engine.truncate(keep)
                piece = piece[: max(0, len(piece) - (len(text) - text.index(hit)))]
                if piece:
                    yield Piece(token, piece, time.perf_counter() - start)
                return
            if piece:
                yield Piece(token, piece, time.perf_counter() - start)
            if produced >= max_tokens:  # as unchained: the last token is not fed
                self._engine.truncate(keep)
                return

    def reset(self) -> None:
        self._engine.reset()

    # ---- inspection ----------------------------------------------------------------------------
    def memory_report(self) -> dict:
        """{part: (planned bytes, allocated bytes)} for weights, KV cache and decode scratch."""
        return self._engine.memory_report()

    def dispatch_table(self) -> list[dict]:
        """The per-token command list: label, kernel, workgroups, bindings (size, offset, range)."""
        return self._engine.dispatch_table()

    def __repr__(self) -> str:
        c = self.config
        return f"Model({self.path!r}, {c.architecture}, context={self.context}, device={self._engine.device_name!r})"


def _progress_bar():
    try:
        from tqdm import tqdm
    except ImportError:
        return None

    class Bar:
        def __init__(self):
            self.bar = None

        def __call__(self, stage, done, total):
            if total and self.bar is None:
                self.bar = tqdm(total=total, desc="loading weights", unit="tensor", leave=False)
            if self.bar is not None and total:
                self.bar.n = done
                self.bar.refresh()

        def close(self):
            if self.bar is not None:
                self.bar.close()

    return Bar()
