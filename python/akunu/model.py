"""akunu.Model: load a model and run it, with its insides visible as NumPy arrays.

    m = akunu.Model("model.gguf", context=2048)
    logits = m.eval(m.tokenize("def fib(n):"))     # the last position's logits (NumPy)
    for piece in m.generate("def fib(n):", max_tokens=32):
        print(piece.text, end="")
    m.kv_cache.k(0)                                # [n_kv_heads, length, head_dim] f16 view
    logits, hidden = m.eval(ids, hidden_states=[0, -1])  # residual stream after layers 0 and -1
    state = m.save_state()                         # bytes; m.load_state(state) goes back to it
    other = m.fork()                               # same weights, its own cache and state copy

Encoders (BERT-style embedding models) load as akunu.Encoder; akunu.load(path) picks the class.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from collections.abc import Iterator, Sequence

import numpy as np

from akunu import _akunu, _progress, hub, speculative
from akunu import batch as _batch
from akunu._device import selector, split_selectors
from akunu._inputs import fit_context, int_arg
from akunu.controls import LogitControls, host_steps, prompt_logprobs
from akunu.model_use import ExclusiveSteps, write_atomically
from akunu.profile_tables import median_profile
from akunu.sampling import Generation, Piece, Sampler, Stream, stop_cut
from akunu.token_ids import prompt_ids
from akunu.tokenizer import Tokenizer
from akunu.views import KVCacheView, ScratchView, dequantize_kv  # noqa: F401 (dequantize_kv: akunu's API)


def _is_encoder(path: str, config=None) -> tuple[bool, str]:
    """(whether the model's architecture is an encoder, its name), from its config alone."""
    arch = (config or _akunu.load_config(_akunu.open_model(path))).architecture
    row = next((a for a in _akunu.arch_table() if a["name"] == arch), None)
    return row is not None and not row["causal"], arch


class Model:
    """A loaded causal language model: tokenizer, engine and views of its KV cache and scratch
    buffers. An encoder's file (bert) raises akunu.Error naming akunu.Encoder, which loads it."""

    def __init__(self, path, context: int | None = None, device: str | int | dict | None = None,
                 progress: bool | None = None,
                 chain: int = 0, prefill_chunk: int = 0, kv_dtype: str = "f16", kv_alloc: str = "full",
                 kv_ring: bool = False, tuning: dict | str | None = None, gguf_file: str | None = None,
                 revision: str | None = None, devices: Sequence[str | int | dict] | None = None,
                 split: Sequence[float] | None = None):
        """path: a GGUF file, a Hugging Face safetensors folder or file, or a Hugging Face repo id
        ("org/name") found in the local Hugging Face cache or downloaded into it (akunu.hub);
        gguf_file names the file of a GGUF repo (or of a folder), revision a branch, tag or commit.
        context: positions the KV cache holds; None: 4096, or the trained length if shorter.
        More than the model was trained for is clipped to that, with an akunu.ContextWarning.
        device: an entry of akunu.devices() or its index, part of a device's name, "vulkan"
        (the best Vulkan device; "vulkan:N" the Nth) or "cpu" (akunu's native CPU backend, the last entry of
        devices()); None: AKUNU_DEVICE, else the best Vulkan GPU, else the CPU backend (where
        Vulkan offers only CPU implementations such as lavapipe, or nothing; find_device() says
        why).
        chain: decode steps per GPU submission (0: chosen from the device profile).
        prefill_chunk: prompt tokens per prefill submission (0: 512; 128 on the CPU backend).
        kv_dtype: the KV cache's storage, "f16" or quantized with one f16 scale per (head,
        position) row: "q8" (int8), "int4" ([-8, 7]) or "fp4" (E2M1), or keys in q8 and values in
        4 bits, "q8/int4" or "q8/fp4", or "int4h": int4 rows of Hadamard-rotated keys and values,
        the closest 4-bit format to f16, and "fp4h" the same with fp4 rows (docs/kv-quality.md
        compares them); see KVCacheView.
        A quantized format spelled "<format>+w<n>" ("int4h+w8") also keeps a recent window:
        each query reads its n latest keys and values in f16 (the current rows from the step,
        older ones from a ring of n + 2 * chain f16 rows per layer and KV head that rewinds of
        up to 2 * chain positions find intact; a deeper rewind rebuilds the ring's lost rows
        from the cache's codes). "<format>+w" takes the default window of 8.
        kv_alloc: "full" pre-allocates the KV cache for the whole context; "blocks" allocates it
        in blocks of 256 positions as the sequence grows (one allocation per block, never per
        token; the recorded commands read the blocks through a table of device addresses).
        kv_ring: sliding-window layers keep a ring of window + max(prefill_chunk, 2 * chain)
        positions instead of the whole context (global layers are unchanged; composes with
        kv_alloc). Logits are the same bit for bit, but once the ring has wrapped, truncate()
        rewinds only as far as the rings still hold (KVCacheView.sliding_from), which is why
        it is not the default.
        tuning: settings over AKUNU_TUNE for this model's device, a dict ({"gemv_handoff":
        False}) or "key=value,..." (docs/configuration.md lists the keys); they change how the
        engine runs, not what it computes beyond rounding.
        devices: a model larger than one device, split by layers (docs/devices.md): consecutive
        layers on each entry (selectors as for `device`; "cpu" last, for llama.cpp-style partial
        offload), each holding its layers' weights and KV cache; the residual stream passes
        from one to the next through host memory once per step. The same device may be named
        twice (two logical devices). split: the layers each takes, as counts that sum to the
        model's layers or as proportions; None: in proportion to the devices' free memory.
        Model.parts shows the split, akunu.plan(path, devices=...) whether each part fits."""
        if kv_alloc not in ("full", "blocks"):
            raise ValueError(f"kv_alloc must be 'full' or 'blocks', not {kv_alloc!r}")
        path = hub.resolve(path, gguf_file, revision)
        config = _akunu.load_config(_akunu.open_model(path))
        encoder, arch = _is_encoder(path, config)
        if encoder:
            raise _akunu.Error(f"{path}: {arch} is an encoder (an embedding model), not a causal language model: load "
                               f"it with akunu.Encoder({path!r}) (or akunu.load({path!r}), which picks the class "
                               "from the file)")
        self.path = path
        context = fit_context(context, config.max_context, path, config.as_dict()["rope_scaling"])
        bar = _progress.LoadBar(progress)
        device = selector(device)
        parts = split_selectors(devices, device, split)
        # The engine validates and plans the model before it allocates anything; the tokenizer
        # comes after (docs/architecture.md, "Loading a model"), so a model that does not fit
        # fails first.
        chain, prefill_chunk = int_arg(chain, "chain"), int_arg(prefill_chunk, "prefill_chunk")
        self._engine = _akunu.Engine(path, context, device, bar, chain, prefill_chunk, kv_dtype, kv_alloc == "blocks",
                                     bool(kv_ring), tuning, parts, [float(x) for x in split or []])
        bar.close()
        self.tokenizer = Tokenizer.from_file(path)
        self.kv_cache = KVCacheView(self._engine)
        self.scratch = ScratchView(self._engine)
        self._kept_batches = _batch.KeptBatches()

    # ---- text ----------------------------------------------------------------------------------
    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`, with the model's special tokens (such as BOS) unless told not to."""
        return self.tokenizer.encode(text, add_special_tokens)

    def detokenize(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of token ids."""
        return self.tokenizer.decode(ids, skip_special_tokens)

    # ---- running -------------------------------------------------------------------------------
    @property
    def config(self):
        """The ModelConfig: shapes, architecture, RoPE and norm settings."""
        return self._engine.config

    @property
    def device(self) -> _akunu.Device:
        """The akunu.Device the model runs on: .name (as akunu.devices() names it; the CPU
        backend's adds its activation mode, such as ", int8 activations" with AKUNU_INT8=1),
        .profile (with the tuning it was created with), .backend; str() gives its name."""
        return self._engine.device

    @property
    def parts(self) -> list[dict]:
        """The parts of a model split across devices, in layer order (one part unless split):
        [{device, layers: (first, last + 1), weights_bytes, kv_bytes}]."""
        return self._engine.parts

    @property
    def chain(self) -> int:
        """Decode steps per GPU submission (from the device profile unless given at load)."""
        return self._engine.chain

    @property
    def prefill_chunk(self) -> int:
        """Prompt tokens per prefill submission."""
        return self._engine.prefill_chunk

    @property
    def context(self) -> int:
        """Positions the KV cache holds (the requested context, clipped to the trained one with an
        akunu.ContextWarning)."""
        return self._engine.context

    def eval(self, ids: Sequence[int], all_logits: bool = False, hidden_states: Sequence[int] | None = None,
             reset: bool = True, continue_: bool = False):
        """Runs `ids` (token ids; a str is tokenized) in batched prefill chunks, from an empty
        cache: each call is independent, as generate() is. reset=False (or continue_=True, the
        same) runs them after what the cache holds instead, continuing a sequence. Returns the last
        position's logits as a new [vocab] float32 array (scratch["logits"] is the buffer itself,
        which the next step overwrites; on a discrete GPU the host reads that mapped memory
        uncached, a few bytes per bus round trip, while this copy goes through a staging
        buffer) or, with all_logits=True, a new [len(ids), vocab] float32 array of every
        position's logits. A prompt longer than the free context raises and changes nothing.

        hidden_states: layer indices (negative ones count from the end, as in Python). Then
        eval returns a pair (logits as above, {layer: [len(ids), dim] float32}): the residual
        stream after each named layer, keyed by the index as given. The last layer's is taken
        before the output norm. A layer the model does not have raises akunu.Error. The first
        call for a set of layers builds a prefill table with copies after them, kept for later
        calls (the 8 most recently used sets are kept, so the device memory they take stays
        bounded); eval without hidden_states runs exactly as before. Ids are checked as
        akunu.token_ids says (integers in [0, vocab))."""
        ids = prompt_ids(ids, self.config.vocab_size, "eval", self.tokenize)
        if reset and not continue_:
            self.reset()
        layers = [int(layer) for layer in hidden_states or []]
        if not layers:
            if all_logits:
                return self._engine.eval(ids, True)
            self._engine.eval(ids)
            return self.scratch.read("logits")
        logits, hidden = self._engine.eval(ids, bool(all_logits), layers)
        return (logits if all_logits else self.scratch.read("logits")), dict(zip(layers, hidden))

    def generate(self, prompt: str | bytes | Sequence[int], max_tokens: int = 128, sampler: Sampler | None = None,
                 stop: str | Sequence[str] | None = None, stream: bool = True, reset: bool = True, *, n: int = 1,
                 logprobs: int = 0, prompt_logprobs: bool = False, repetition_penalty: float = 1.0,
                 presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 logit_bias: dict[int, float] | None = None, logits_processors: Sequence | None = None,
                 draft: Model | None = None, draft_tokens: int = 4):
        """Generates after `prompt` (text: a str, or bytes as UTF-8; or token ids used as given: a
        list, a 1-D array, a [1, n] tensor or a BatchEncoding) with `sampler` (greedy by default),
        from an empty cache unless reset=False (then after what the cache holds). `stop`: a
        string, or a list of strings, that ends generation where it appears; the text ends where
        the first one begins, also across tokens, and a stream holds back what may begin one
        until the next token rules it out (a Piece's text may then be empty). stream=True
        returns a Stream that yields Piece objects (id, text, logprob,
        time) as tokens arrive, its `result` filling in as they do; stream=False returns that
        Generation: the text, token ids, logprobs, and the prompt and decode speeds.
        Generation ends at max_tokens, a stop token, a `stop` string, or the end of the
        context, and the KV cache then holds exactly the prompt and the tokens fed back.

        Logit controls (akunu.controls, docs/sampling-controls.md): repetition_penalty,
        presence_penalty, frequency_penalty, logit_bias {token id: bias} and logits_processors
        (processor(input_ids, logits) -> logits) change the logits before the sampler;
        logprobs=N fills Generation.top_logprobs (and Piece.top_logprobs) with the N most
        likely (id, logprob) pairs of every step; prompt_logprobs=True fills
        Generation.prompt_logprobs (with logprobs=N also Generation.prompt_top_logprobs). Any
        of them runs one step per submission with the logits read back to the host: slower
        than the default path, which samples on the device in chains.

        n > 1 draws n samples after one prefill of the prompt (the prompt's state is saved once
        and each sample starts from it; sample i uses the seed sampler.seed + i) and returns a
        list of n Generations (stream must be False).

        draft: a model with the same vocabulary proposes draft_tokens tokens a round, checked in one
        multi-row step (akunu.speculative); stream must be False; see Generation.acceptance_rate."""
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        ids = prompt_ids(prompt, self.config.vocab_size, "generate", self.tokenize, bytes_text=True)
        if not ids:
            raise ValueError("the prompt is empty")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if not all(isinstance(s, str) and s for s in stops):
            raise TypeError(f"stop: expected a non-empty string or a list of them, got {stop!r}")
        controls = LogitControls(repetition_penalty, presence_penalty, frequency_penalty, dict(logit_bias or {}),
                                 tuple(logits_processors or ()), logprobs, bool(prompt_logprobs))
        controls.validate(self.config.vocab_size)
        sampler = sampler or Sampler()
        if draft is not None:
            if stream or n != 1 or controls.on_host or stops:
                raise ValueError("generate with a draft returns one Generation: pass stream=False, and no n, stop "
                                 "strings or logit controls")
            return speculative.generate(self, draft, ids, draft_tokens, max_tokens, sampler)
        if not (isinstance(n, int) and n >= 1):
            raise ValueError(f"n must be an int >= 1 (samples per prompt), got {n!r}")
        if n > 1:
            if stream:
                raise ValueError("n > 1 returns a list of Generations: pass stream=False")
            return self._samples(ids, n, max_tokens, sampler, stops, reset, controls)
        result = Generation(text="", prompt_tokens=len(ids))
        pieces = Stream(self._generate(ids, max_tokens, sampler, stops, reset, result, controls), result)
        if stream:
            return pieces
        for _ in pieces:
            pass
        return result

    def _samples(self, ids, n, max_tokens, sampler, stop, reset, controls) -> list[Generation]:
        """n Generations after one prefill of ids[:-1]: each sample restores that state and runs
        the last prompt token itself, so that its first token is drawn by its own sampler."""
        if reset:
            self.reset()
        rows = self._engine.eval(ids[:-1], controls.prompt_logprobs) if len(ids) > 1 else None
        top = controls.top if controls.top_logprobs else None
        shared, shared_tops = prompt_logprobs(rows, ids, top) if controls.prompt_logprobs else (None, None)
        state = self.save_state()
        each = dataclasses.replace(controls, prompt_logprobs=False)
        out = []
        for i in range(n):
            if i:
                self.load_state(state)
            result = Generation(text="", prompt_tokens=len(ids), prompt_logprobs=shared,
                                prompt_top_logprobs=shared_tops)
            seeded = dataclasses.replace(sampler, seed=(sampler.seed + i) % 2**64)
            for _ in Stream(self._generate(ids[-1:], max_tokens, seeded, stop, False, result, each), result):
                pass
            out.append(result)
        return out

    def chat(self, messages: Sequence[dict], max_tokens: int = 256, sampler: Sampler | None = None,
             stop: Sequence[str] | None = None, stream: bool = False, chat_template: str | None = None,
             **template_kwargs):
        """The assistant's reply to `messages` ([{"role": ..., "content": ...}], as transformers'
        chat templates take them): the conversation is rendered with the model's chat template
        (or `chat_template`) ending in the assistant's header (add_generation_prompt=True), and
        generated after as generate() does. Returns the Generation (its .text, or str() of it,
        is the reply), or with stream=True the Stream of its Pieces. template_kwargs reach the
        template (tools, documents, enable_thinking, ...)."""
        _check_messages(messages)
        ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True,
                                                 chat_template=chat_template, **template_kwargs)
        return self.generate(ids, max_tokens=max_tokens, sampler=sampler, stop=stop, stream=stream)

    def _sampled(self) -> Iterator[tuple[int, float, int]]:
        """Sampled tokens after what the cache holds: (id, logprob, the cache length that
        excludes it, the length to rewind to if generation ends at that token). Chains run
        `chain` steps per submission, two in flight, each step embedding the id the previous
        one sampled; single steps are used where a whole chain no longer fits the context."""
        e = self._engine
        pending = e.sampled_token()  # sampled, not yet fed to the model
        yield pending, e.sampled_logprob(), e.kv_length
        while e.kv_length < self.context:
            if e.chain > 1 and e.kv_length + e.chain <= self.context:
                e.chain_start(pending)
                while (done := e.chain_next(True)) is not None:
                    ids, logprobs, first = done
                    for k, (token, logprob) in enumerate(zip(ids, logprobs)):
                        yield token, logprob, first + k + 1
                    pending = ids[-1]
            else:
                e.decode(pending)
                pending = e.sampled_token()
                yield pending, e.sampled_logprob(), e.kv_length

    def _generate(self, ids, max_tokens, sampler, stop, reset, result: Generation,
                  controls: LogitControls) -> Iterator[Piece]:
        """A stop token or string ends generation at exactly that token; the cache is rewound
        past the steps a chain ran after it."""
        e = self._engine
        with e.held():
            if reset:
                e.reset()
            e.set_sampler(sampler.temperature, sampler.top_k, sampler.top_p, sampler.min_p, sampler.seed)
            start = time.perf_counter()
            keep = e.kv_length
            if not controls.on_host:  # on the host, the prompt runs inside, on the first step
                e.eval(ids)
                keep = e.kv_length
        if controls.on_host:
            steps = ExclusiveSteps(e, host_steps(self, ids, sampler, controls, result))
        else:
            steps = ExclusiveSteps(e, ((token, logprob, at, None) for token, logprob, at in self._sampled()))
        decoder = self.tokenizer.stream(skip_special_tokens=True)
        stop_ids = set(self.tokenizer.stop_ids)
        text, shown = "", 0  # shown: the characters of text that pieces carried
        first_at = None

        def piece(token, chars, logprob, top):
            nonlocal first_at
            now = time.perf_counter() - start
            if first_at is None:
                first_at = result.time_to_first_token = now
            result.decode_seconds = now - first_at
            result.token_ids.append(token)
            result.logprobs.append(logprob)
            if top is not None:
                result.top_logprobs.append(top)
            return Piece(token, chars, logprob, now, top)

        result.stop_reason = "context"
        try:
            for produced, (token, logprob, keep, top) in enumerate(steps, 1):  # noqa: B007 (finally reads keep)
                if math.isnan(logprob):  # the sampled row's logprob is NaN only if its logits hold NaN
                    raise _akunu.Error(f"{self.path}: the forward pass produced NaN logits at position {keep - 1} "
                                       "(a weight or config value of the model is not finite?)")
                if token in stop_ids:
                    result.stop_reason = "stop_token"
                    result.stop_token = (token, logprob, top)
                    if first_at is None:  # the prompt's speed stands even when nothing follows it
                        result.time_to_first_token = time.perf_counter() - start
                    return
                text += decoder.put(token)
                end, hit = stop_cut(text, stop, final=produced >= max_tokens)
                yield piece(token, text[shown:end], logprob, top)  # what may begin a stop string waits
                shown = end
                if hit:
                    result.stop_reason = "stop_string"
                    return
                if produced >= max_tokens:  # as unchained: the last token is not fed
                    result.stop_reason = "max_tokens"
                    return
        finally:  # also when the caller stops iterating early; never on another call's cache
            result.text += text[shown:] if result.stop_reason in ("stop_token", "context") else ""
            if steps.untouched():
                with e.held():
                    e.truncate(min(keep, e.kv_length))

    def embed(self, texts: Sequence[str], pooling: str = "last", normalize: bool = True) -> np.ndarray:
        """Embeddings of `texts` from this causal language model: [len(texts), dim] float32,
        each text's final hidden states (after the output norm, as transformers'
        last_hidden_state) pooled by "last" (the last token's row, as decoder embedding
        models such as Qwen3-Embedding use it) or "mean", then L2-normalized unless told not
        to. Each text runs alone from an empty cache; the cache is reset (akunu.decoder_embed)."""
        from akunu.decoder_embed import embed

        return embed(self, texts, pooling, normalize)

    # ---- evaluation ----------------------------------------------------------------------------
    def score(self, ids: Sequence[int], progress: bool | None = None) -> np.ndarray:
        """log p(ids[i] | ids[:i]) for i = 1 .. len(ids) - 1, from all-position logits of the
        batched prefill. Sequences longer than the context are scored in consecutive windows of
        `context` tokens, each starting from an empty cache. The cache is reset. `progress`: a
        bar over the tokens (None: on a terminal or in a notebook, once scoring has run a while)."""
        ids = prompt_ids(ids, self.config.vocab_size, "score", self.tokenize)
        if len(ids) < 2:
            raise ValueError("scoring needs at least two tokens")
        bar = _progress.bar(len(ids) - 1, "scoring", "tok", progress)
        out = []
        for at in range(0, len(ids) - 1, self.context):
            window = ids[at: at + self.context + 1]  # the last id is only a target
            self.reset()
            logits = self._engine.eval(window[:-1], True)
            logits -= logits.max(axis=1, keepdims=True)
            log_z = np.log(np.exp(logits).sum(axis=1))
            out.append(logits[np.arange(len(window) - 1), window[1:]] - log_z)
            bar.update(len(window) - 1)
        bar.close()
        self.reset()
        return np.concatenate(out).astype(np.float64)

    def generate_batch(self, prompts: Sequence, max_tokens: int = 128, sampler=None, stop=None,
                       max_sequences: int = 64) -> list[Generation]:
        """One Generation per prompt, the prompts run together in batched steps (akunu.batch);
        sampler: one Sampler for all, or a list with one per prompt. The model keeps the batch
        between calls (akunu.batch.KeptBatches; release_batches() frees it)."""
        return _batch.generate_batch(self, prompts, max_tokens, sampler, stop, max_sequences)

    def stream_batch(self, prompts: Sequence, max_tokens: int = 128, sampler=None, stop=None,
                     max_sequences: int = 64) -> Iterator[tuple[int, Piece]]:
        """(prompt index, Piece) as generate_batch samples them."""
        return _batch.stream_batch(self, prompts, max_tokens, sampler, stop, max_sequences)

    def score_batch(self, sequences: Sequence[Sequence[int]], max_sequences: int = 64, rows: int = 0,
                    greedy: bool = False) -> list:
        """score() of each token list, run together as batched prefill (akunu.batch): a list
        longer than context + 1 ids in score()'s windows; greedy=True: (scores, whether each
        token was its row's argmax) each. The model keeps the batch between calls
        (akunu.batch.KeptBatches; release_batches() frees it)."""
        return _batch.score_batch(self, sequences, max_sequences, rows, greedy)

    def release_batches(self) -> None:
        """Frees the batches that score_batch and generate_batch/stream_batch keep between calls
        (memory_report()["kept_batches"] bytes, akunu.batch.KeptBatches), so that the next such
        call allocates its KV pool and records its tables again."""
        self._kept_batches.release()

    def perplexity(self, text: str | bytes | Sequence[int], progress: bool | None = None, batch: bool = False) -> float:
        """exp(mean negative log-likelihood) of `text` (a str, or bytes as UTF-8, tokenized with
        the model's special tokens, such as BOS) or of token ids, as score() computes them.
        batch=True scores score()'s windows of `context` tokens together through score_batch
        (the same windows; log-probabilities within the batch's tolerance of score()'s,
        docs/batch.md), which pays only where a batched step outruns a prefill chunk."""
        ids = prompt_ids(text, self.config.vocab_size, "perplexity", self.tokenize, bytes_text=True)
        scores = self.score_batch([ids])[0] if batch else self.score(ids, progress)
        return math.exp(-float(np.mean(scores)))

    def reset(self) -> None:
        """Empties the KV cache (waiting for any chains still on the GPU)."""
        self._engine.reset()

    # ---- state ---------------------------------------------------------------------------------
    def save_state(self, path: str | os.PathLike | None = None) -> bytes | None:
        """The model's state: the KV cache's rows, its length, the sampler settings (with the
        seed, which with the position keys the sampler's RNG), the last sampled token, its
        logprob and the last logits. Returns bytes, or writes them to `path` and returns None.
        The format is versioned and checksummed, and names the model by a fingerprint of its
        config and weights. A file is written whole or not at all: to a temporary file in the
        same folder, flushed to disk, then renamed over `path`, so a full disk or a kill midway
        leaves the previous file as it was."""
        data = self._engine.save_state()
        if path is None:
            return data
        write_atomically(os.fspath(path), data)
        return None

    def load_state(self, data_or_path: bytes | bytearray | memoryview | str | os.PathLike) -> None:
        """Restores a state from save_state() (bytes or a file): the model then continues
        exactly as the saved one would have, token for token and logit for logit. A state of
        another model, of another format version, or damaged or truncated bytes raise
        akunu.Error saying what differs, and the current state is kept."""
        if isinstance(data_or_path, (bytes, bytearray, memoryview)):
            self._engine.load_state(data_or_path)
            return
        path = os.fspath(data_or_path)
        with open(path, "rb") as f:
            data = f.read()
        try:
            self._engine.load_state(data)
        except _akunu.Error as e:
            raise _akunu.Error(f"{path}: {e}") from None

    def fork(self) -> Model:
        """A second Model on the same device and weights (nothing is loaded again) with its own
        KV cache, scratch buffers and dispatch tables, starting from a copy of this model's
        state: two continuations of one prompt, each independent of the other. Each fork adds
        the KV cache and scratch of memory_report()["fork"] bytes."""
        other = copy.copy(self)  # the path and the tokenizer are shared
        other._engine = self._engine.fork()
        other.kv_cache = KVCacheView(other._engine)
        other.scratch = ScratchView(other._engine)
        other._kept_batches = _batch.KeptBatches()
        return other

    # ---- inspection ----------------------------------------------------------------------------
    def memory_report(self) -> dict:
        """{part: (planned bytes, allocated bytes)} for weights, KV cache, decode and prefill scratch,
        plus plain numbers: fork (the bytes each fork() adds: KV cache and scratch),
        kv_cache_max (the KV cache at the full context: it grows to that in blocks), kv_block
        (bytes per block of 256 positions, 0 when pre-allocated), kv_blocks (blocks allocated
        now), kv_ring_rows (rows of each sliding-window ring, 0 without), kv_recent ({window,
        rows, bytes} of a recent window's f16 rings, "int4h+w8"), kv_layers (each layer's
        layout), weight_sharers (this model and its forks, which share one copy of the weights),
        staging (the device's host staging area, through which reads and writes of unmapped
        buffers of any size go in pieces, sized at load by the largest reader),
        device_allocated and device_allocations (over the device, forks included; staging
        counted), kept_batches (the bytes of the batches score_batch and generate_batch keep
        between calls, 0 without; release_batches() frees them)."""
        return {**self._engine.memory_report(), "kept_batches": self._kept_batches.bytes()}

    def profile(self, tokens: int = 1, runs: int = 1) -> list[dict]:
        """Device time of each command of a decode step (tokens=1) or of a prefill chunk of
        `tokens` tokens (GPU timestamps; on the CPU backend, the host clock between commands),
        run after what the cache holds (its length does not change):
        [{label, kernel, spec, ms, bytes_bound}]. With runs > 1 each command's ms is its median over
        that many runs, which steadies single readings of microsecond kernels. On a GPU each
        timed run follows untimed replays of itself, in the same submission, that keep the GPU
        busy for about 0.4 s: a GPU left idle clocks down, and timed cold a step can read twice
        its decode time. akunu.profile_table() sums them by kernel class."""
        return median_profile(lambda: self._engine.profile(int(tokens)), runs)

    def kernel_statistics(self) -> list[dict]:
        """What the driver compiled this model's kernels to: [{kernel, spec, statistics: {name:
        value}, code}], such as registers per invocation and shared memory, which bound how many
        workgroups a compute unit holds at once; [] where the device does not report them
        (VK_KHR_pipeline_executable_properties; lavapipe and the CPU backend do not).
        akunu.kernel_statistics_table() prints them. code: with tuning kernel_code=1, the
        driver's internal representations of each kernel ([{name, description, text,
        binary_bytes}]: its assembly where the driver gives it), else []."""
        return self._engine.kernel_statistics()

    def dispatch_table(self, prefill: bool = False) -> list[dict]:
        """The per-token command list: label, kernel, spec (its specialization constants),
        groups (workgroups), bindings (size, offset, range), columns, chunk. columns holds, per
        binding, None or (row_stride, row_bytes) for a column view: the kernel touches only
        row_bytes of every row_stride bytes from the offset (Q, K and V in their [q | k | v]
        rows), so writers of columns that do not meet wait at no barrier for each other.
        prefill=True gives a prefill chunk's table instead. Its commands up to the tail run
        over the chunk's rows, and their chunk is {axis, rows, min_rows, max_rows}: the
        recorded groups cover `rows` tokens, and a chunk of n tokens runs only the groups that
        cover its n rows ("linear": of the flat count, "x" or "y": along that axis; "none":
        all of them), none at all unless min_rows <= n < max_rows (0: no bound). chunk is None
        for the rest. position_block is non-zero where the groups along y cover the KV cache in
        blocks of that many positions (decode attention): a step at position pos runs
        pos // position_block + 1 of them. awaits_previous is True where the command waits for
        the one before it itself, with no barrier between them (a decode step's GEMV hand-off,
        on NVIDIA GPUs or with tuning gemv_handoff=1)."""
        return self._engine.dispatch_table(prefill)

    def plan(self, prefill: bool = False) -> dict:
        """The choices the decode step's table (prefill=True: a prefill chunk's) is built from,
        made once from the config, the weight types, the device profile and its tuning:

        - pass-wide: x_rounding (how block-format GEMVs hold x: "int16", "int8" or "float"),
          head_norm_folded (the output norm folded into the LM head's GEMV); decode: handoffs
          (any GEMV hand-off in use); prefill: half_x (the chunk's GEMMs take halves for rows
          of dim, of ffn), short_rows (chunks of up to this many tokens run short GEMM tiles)
          and dequant_rows (chunks of this many tokens or more read block-format weights
          dequantized to f16; 0: never).
        - layers, one dict each. Decode: attn_norm_folded / ffn_norm_folded (the pre-norm
          folded into the GEMVs that read it), qkv_fused (Q, K and V in one dispatch),
          rope_folded (RoPE and the KV write ride on it), gate_up_fused (act(gate) * up from one
          GEMV), gate_up_parts (gate and up in one dispatch), activation_folded (the down GEMV
          forms act(gate) * up), o_norm_forward / down_norm_forward (that GEMV hands the next
          pre-norm forward), handoffs (the places where counters replace barriers). Prefill:
          gemm_gated (gate and up GEMMs with the activation in their epilogue) from chunks of
          gemm_gated_from tokens, attn_out_dtype (attention's output as halves for O).

        dispatch_table() shows the commands these choices give."""
        return self._engine.pass_plan(prefill)

    def barrier_count(self, prefill: bool = False) -> int:
        """How many barriers the recorded decode step (prefill=True: a prefill chunk) waits at
        between its dispatches. A dispatch waits only for the ones it depends on (it reads or
        writes what they wrote, or writes what they read), and a chunk's dispatches whose row
        windows (dispatch_table's min_rows, max_rows) do not meet never wait for each other."""
        return self._engine.barrier_count(prefill)

    def __repr__(self) -> str:
        return f"Model({self.path!r}, {self.config.architecture}, context={self.context}, device={self.device.name!r})"


def _check_messages(messages) -> None:
    """A chat is a list of {"role": str, "content": ...} dicts; anything else raises TypeError
    naming the message at fault (a template would fail on it with a less helpful message)."""
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts, "
                        f"not a {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TypeError(f"messages[{i}] must be a dict with a string 'role' (and its 'content'), got {message!r}")

