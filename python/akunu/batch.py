"""akunu.Batch: many sequences decoded together over one model's weights (docs/batch.md).

    b = akunu.Batch(m, max_sequences=8)
    a = b.add(m.tokenize("def fib(n):"))                 # a sequence id
    c = b.add(m.tokenize("class Stack:"), sampler=akunu.Sampler(temperature=0.8, seed=1))
    for seq, token, logprob in b.step():                  # one batched step: a token per sequence
        ...
    b.kv_cache(a).k(0)                                    # [n_kv_heads, length, head_dim] f16 copy
    b.remove(a)                                           # its KV blocks go back to the pool

    m.generate_batch(["def f(", "class A"], max_tokens=32)   # one Generation per prompt
    m.score_batch([[1, 2, 3], [4, 5]])                        # log p of each token after the first

A step runs the rows of every sequence in one recorded dispatch table: the GEMMs multiply the
weights by all rows at once, attention reads each row's own sequence's KV blocks, and each row
is sampled with its sequence's sampler, keyed by (seed, position) as a single sequence's is.
A model split across devices batches too: each device runs its layers for every row
(engine/batch_pipeline.h).
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from akunu import _akunu
from akunu._inputs import int_arg
from akunu.controls import log_softmax
from akunu.profile_tables import median_profile
from akunu.sampling import Generation, Piece, Sampler, stop_cut
from akunu.token_ids import prompt_ids
from akunu.views import KVCacheView


class _SequenceCache:
    """What KVCacheView reads, for one sequence of a batch: copies of its rows in position order."""

    def __init__(self, engine, seq: int):
        self._e, self._seq = engine, seq
        self.kv_dtype = engine.kv_dtype
        self.context = engine.context
        self.kv_sliding_from = 0

    @property
    def kv_length(self) -> int:
        return self._e.length(self._seq)

    @property
    def kv_layers(self) -> list[str]:
        return ["batch"] * self._e.n_layers

    def kv_view(self, layer: int, values: bool, scales: bool = False, copy: bool = False) -> np.ndarray:
        # A sequence's rows lie in its blocks of the pool: always a copy, gathered in position order.
        return self._e.kv_view(self._seq, layer, values, scales)

    def reset(self) -> None:
        raise _akunu.Error("a batch's sequence is not rewound: remove() it and add() it again")

    truncate = reset


def _seq(seq) -> int:
    """A sequence id as the engine takes it (it says which ids are in the batch)."""
    return int_arg(seq, "sequence id", lo=-(2**31))


class Batch:
    """Up to max_sequences sequences of one model, run together a step at a time.

    max_sequences: sequences held at once (their ids are 0 .. max_sequences - 1, reused after
    remove()). rows: tokens one step runs (decode rows first, then pieces of prompts; 0: the
    model's prefill chunk as asked for, not clipped to its context (512 on a GPU, 128 on the CPU
    backend, unless prefill_chunk says otherwise), at least 128, halved where the decode rows'
    attention would not fit its scratch budget, or max_sequences if more). blocks: KV blocks of
    256 positions in the pool (0: enough for every sequence's whole context). prefix_sharing: a
    prompt that starts with whole blocks another sequence has run reuses those blocks instead of
    running them again. The KV format is the model's kv_dtype. The batch keeps its own KV pool,
    scratch and dispatch table and shares the model's weights; the model itself can run beside
    it."""

    def __init__(self, model, max_sequences: int = 8, rows: int = 0, blocks: int = 0, prefix_sharing: bool = True):
        self.model = model
        # The engine says why a value in a C int's range is out of its own.
        sizes = [int_arg(v, n, lo=-(2**31)) for v, n in ((max_sequences, "max_sequences"), (rows, "rows"),
                                                         (blocks, "blocks"))]
        self._b = _akunu.BatchEngine(model._engine, *sizes, bool(prefix_sharing))

    @property
    def max_sequences(self) -> int:
        """Sequences the batch holds at once."""
        return self._b.max_sequences

    @property
    def rows(self) -> int:
        """Tokens one step runs at most."""
        return self._b.rows

    def add(self, ids, sampler: Sampler | None = None, *, score: bool = False) -> int:
        """Adds a sequence that runs `ids` (token ids, or text to tokenize) and then samples with
        `sampler` (greedy by default); returns its id. Bad ids raise and change nothing."""
        ids = prompt_ids(ids, self.model.config.vocab_size, "Batch.add", self.model.tokenize)
        if not ids:
            raise ValueError("Batch.add: the prompt is empty")
        s = sampler or Sampler()
        return self._b.add(ids, s.temperature, s.top_k, s.top_p, s.min_p, s.seed, bool(score))

    def add_empty(self, sampler: Sampler | None = None) -> int:
        """Adds a sequence with an empty cache and nothing to run; returns its id. Its cache is
        written through akunu.KVCache (update, advance), and extend() gives it tokens."""
        s = sampler or Sampler()
        return self._b.add_empty(s.temperature, s.top_k, s.top_p, s.min_p, s.seed)

    def extend(self, seq: int, ids) -> None:
        """Appends token ids (or text to tokenize) for `seq` to run after what it has pending."""
        self._b.extend(_seq(seq), prompt_ids(ids, self.model.config.vocab_size, "Batch.extend", self.model.tokenize))

    @property
    def kv(self):
        """The batch's KV cache as an akunu.KVCache: arrays [sequence slot, position, head, dim]."""
        from akunu.kv_cache import KVCache

        return KVCache(self)

    def fork(self, seq: int, sampler: Sampler | None = None) -> int:
        """A new sequence with `seq`'s cache (its blocks shared, copied only where either one
        writes into a shared block) and pending token, sampling with `sampler`."""
        s = sampler or Sampler()
        return self._b.fork(_seq(seq), s.temperature, s.top_k, s.top_p, s.min_p, s.seed)

    def remove(self, seq: int) -> None:
        """Ends a sequence; its blocks go back to the pool (shared ones with their last holder)."""
        self._b.remove(_seq(seq))

    def step(self, wait: bool = False) -> list[tuple[int, int, float]]:
        """Runs one batched step. Returns (seq, token, logprob) for each sequence that sampled a
        token: those whose pending tokens (the rest of the prompt, or the last sampled token) all
        ran. A pool without the blocks the step needs raises akunu.Error and changes nothing;
        with wait=True the sequences whose blocks do not fit wait for a later step instead (a
        step none of whose sequences fits still raises). A sequence whose cache fills the context
        samples no more: remove it; a step with nothing else to run raises akunu.Error naming it."""
        return self._b.step(bool(wait))

    def active(self, seq: int) -> bool:
        """Whether `seq` is a sequence of the batch (added and not removed)."""
        return self._b.active(_seq(seq))

    def length(self, seq: int) -> int:
        """Positions in the sequence's cache."""
        return self._b.length(_seq(seq))

    def kv_cache(self, seq: int) -> KVCacheView:
        """The sequence's KV cache as a KVCacheView (copies of its rows, in position order)."""
        self._b.length(_seq(seq))  # raises for a sequence not in the batch
        return KVCacheView(_SequenceCache(self._b, seq))

    def logits(self, seq: int) -> np.ndarray:
        """[vocab] float32: the logits that sampled the sequence's token in the last step."""
        return self._b.logits(_seq(seq))

    def block_table(self, seq: int) -> list[int]:
        """The pool blocks that hold the sequence's positions, 256 each, in order."""
        return list(self._b.block_table(_seq(seq)))

    def memory_report(self) -> dict:
        """The pool's blocks (total, used, shared by several sequences, free) and bytes (on a split
        model, every device's), and the micro-batches a step runs in (2 on a split model unless
        tuning split_microbatches says 1)."""
        return dict(self._b.memory_report())

    def dispatch_table(self) -> list[dict]:
        """The recorded commands of a batched step."""
        return self._b.dispatch_table()

    def profile(self, runs: int = 1) -> list[dict]:
        """Device time of each command of the last step, replayed with the same rows (its KV
        writes put the same values in the same places, so the batch goes on as if it had not been
        profiled): [{label, kernel, spec, ms, bytes_bound}], as Model.profile gives, the table
        of that step (the table of its rows for a step of one to four rows, the short table
        for a step of a few more) and, on a split model, each part's in layer order. With
        runs > 1 each command's ms is its median over that many replays.
        akunu.profile_table() sums them by kernel class."""
        return median_profile(self._b.profile, runs)


def _samplers(sampler, n: int) -> list[Sampler]:
    if isinstance(sampler, (list, tuple)):
        if len(sampler) != n:
            raise ValueError(f"sampler: {len(sampler)} samplers for {n} prompts")
        samplers = [s or Sampler() for s in sampler]
    else:
        samplers = [sampler or Sampler()] * n
    for i, s in enumerate(samplers):
        if not isinstance(s, Sampler):
            raise TypeError(f"sampler {i}: expected an akunu.Sampler or None, not {type(s).__name__}")
    return samplers


def _prompt_list(prompts, what: str) -> list:
    """The prompts as a list; a lone string or bytes is one prompt, not a list of them."""
    if isinstance(prompts, (str, bytes)):
        raise TypeError(f"{what}: expected a list of prompts, not one {type(prompts).__name__} (wrap it: [prompt])")
    return list(prompts)


def _stop_strings(stop) -> list[str]:
    if stop is None:
        return []
    try:
        stops = [stop] if isinstance(stop, str) else list(stop)
    except TypeError:
        stops = None
    if stops is None or not all(isinstance(x, str) for x in stops):
        raise TypeError(f"stop: expected a string or a list of strings, not {stop!r}")
    return stops


class _Running:
    """One prompt's generation inside a batch: what each sampled token adds, decided as
    Model.generate decides it (stop tokens and strings, max_tokens, the context full)."""

    def __init__(self, model, ids, stops):
        self.result = Generation(text="", prompt_tokens=len(ids))
        self.decoder = model.tokenizer.stream(skip_special_tokens=True)
        self.stops = stops
        self.text, self.shown = "", 0  # shown: the characters of text that pieces carried
        self.start = time.perf_counter()
        self.first_at = None

    def take(self, token: int, logprob: float, stop_ids, max_tokens: int, full: bool,
             top: list | None = None) -> tuple[Piece | None, bool]:
        """The piece this token adds (its text holds back what may begin a stop string) and
        whether the generation ended; `top`: the step's top-N (id, logprob) pairs, if asked."""
        r = self.result
        now = time.perf_counter() - self.start
        if math.isnan(logprob):
            raise _akunu.Error("the forward pass produced NaN logits in a batch")
        if token in stop_ids:
            r.stop_reason, r.stop_token = "stop_token", (token, logprob, top)
            r.time_to_first_token = r.time_to_first_token or now
            r.text = self.text
            return None, True
        if self.first_at is None:
            self.first_at = r.time_to_first_token = now
        r.decode_seconds = now - self.first_at
        r.token_ids.append(token)
        r.logprobs.append(logprob)
        if top is not None:
            r.top_logprobs.append(top)
        self.text += self.decoder.put(token)
        last = len(r.token_ids) >= max_tokens
        end, hit = stop_cut(self.text, self.stops, final=last)
        piece = Piece(token, self.text[self.shown:end], logprob, now, top)
        self.shown, r.text = end, self.text[:end]
        if hit or last or full:
            r.stop_reason = "stop_string" if hit else "max_tokens" if last else "context"
            if not hit:
                r.text = self.text
        return piece, hit or last or full


def stream_batch(model, prompts: Sequence, max_tokens: int = 128, sampler=None, stop=None,
                 max_sequences: int = 64, results: list[Generation] | None = None) -> Iterator[tuple[int, Piece]]:
    """Yields (prompt index, Piece) as the batch samples them; `results` (a list) receives one
    Generation per prompt, filled in as they run. Prompts beyond max_sequences wait for a
    sequence to finish (continuous batching)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    vocab = model.config.vocab_size
    all_ids = [prompt_ids(p, vocab, f"generate_batch prompt {n}", model.tokenize, bytes_text=True)
               for n, p in enumerate(_prompt_list(prompts, "generate_batch"))]
    if any(not ids for ids in all_ids):
        raise ValueError("generate_batch: a prompt is empty")
    stops = _stop_strings(stop)
    samplers = _samplers(sampler, len(all_ids))
    runs = [_Running(model, ids, stops) for ids in all_ids]
    if results is not None:
        results[:] = [r.result for r in runs]
    if not all_ids:
        return
    held = max(1, min(max_sequences, len(all_ids)))
    # A sequence writes its prompt and the tokens it samples but the last, up to the context.
    positions = [min(len(ids) + max_tokens, model.context) for ids in all_ids]
    batch = model._kept_batches.take(model, held, 0, _pool_blocks(positions, held), prefix_sharing=True)
    stop_ids = set(model.tokenizer.stop_ids)
    waiting = list(range(len(all_ids)))[::-1]
    index: dict[int, int] = {}
    while waiting or index:
        while waiting and len(index) < held:
            i = waiting.pop()
            index[batch.add(all_ids[i], samplers[i])] = i
        for seq, token, logprob in batch.step():
            i = index[seq]
            piece, done = runs[i].take(token, logprob, stop_ids, max_tokens, batch.length(seq) >= model.context)
            if piece is not None:
                yield i, piece
            if done:
                batch.remove(seq)
                del index[seq]
    model._kept_batches.give_back(batch, 0, prefix_sharing=True)  # not after an error or an abandoned stream


def generate_batch(model, prompts: Sequence, max_tokens: int = 128, sampler=None, stop=None,
                   max_sequences: int = 64) -> list[Generation]:
    """One Generation per prompt (text, token ids, logprobs, stop_reason), all run as one batch."""
    results: list[Generation] = []
    for _ in stream_batch(model, prompts, max_tokens, sampler, stop, max_sequences, results):
        pass
    return results


def score_batch(model, sequences: Sequence[Sequence[int]], max_sequences: int = 64, rows: int = 0,
                greedy: bool = False) -> list[np.ndarray] | list[tuple[np.ndarray, np.ndarray]]:
    """For each token list, log p(ids[i] | ids[:i]) for i = 1 .. len(ids) - 1 (float64), run as
    batched prefill: the rows of many sequences share each step's GEMMs. A list longer than
    context + 1 ids is scored in score()'s windows of `context` tokens, each from an empty cache
    (the last id of a window is only its target), and its windows' scores are joined. rows: the
    batch's rows per step (0: on a GPU twice the prefill chunk as asked for, 1,024, elsewhere a
    Batch's default; not clipped to the context, and as many as the step's logits allow: a step
    reads every weight once, so the more rows the fewer reads a token). greedy=True gives
    (scores, bool array: each token was its row's argmax) per list, as lm_eval's loglikelihood
    needs."""
    vocab = model.config.vocab_size
    all_ids = [prompt_ids(s, vocab, f"score_batch sequence {n}", model.tokenize)
               for n, s in enumerate(_prompt_list(sequences, "score_batch"))]
    for n, ids in enumerate(all_ids):
        if len(ids) < 2:
            raise ValueError(f"score_batch: sequence {n} has {len(ids)} token(s); scoring needs at least two")
    windows, owner = [], []
    for n, ids in enumerate(all_ids):
        for at in range(0, len(ids) - 1, model.context):
            windows.append(ids[at: at + model.context + 1])
            owner.append(n)
    parts: list[list] = [[] for _ in all_ids]
    for n, scores in zip(owner, _score_windows(model, windows, max_sequences, rows, greedy)):
        parts[n].append(scores)
    return [_joined(p, greedy) for p in parts]


def _joined(parts: list, greedy: bool):
    """One sequence's windows' scores (and greedy flags) in order, as one array (or pair)."""
    if len(parts) == 1:
        return parts[0]
    if not greedy:
        return np.concatenate(parts)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _pool_blocks(positions: list[int], held: int) -> int:
    """KV blocks enough for any `held` of the sequences at once, each writing at most the given
    number of positions, rather than every sequence's whole context, which on a large model is
    more than a GPU holds (bench/NOTES.md, "score_batch's KV pool sized to the windows it
    holds")."""
    need = sorted(-(-n // _akunu.KV_BLOCK) for n in positions)
    return sum(need[-held:])


def _scoring_rows(model) -> int:
    """The rows a scoring batch prefers a step (0: a Batch's default; engine/batch.h)."""
    return _akunu.BatchEngine.scoring_rows(model._engine)


def _scoring_batch(model, held: int, rows: int, blocks: int) -> tuple[Batch, int]:
    """(the batch score_batch runs in, the rows asked of it): `rows` if given, else the scoring
    default, and a Batch's default rows where the device cannot hold a batch of that many (an
    allocation failed: twice the chunk is a speed preference, not a need). A model whose
    preferred batch failed once takes the default from then on (until release_batches())."""
    kept = model._kept_batches
    if rows == 0 and not kept.preferred_failed and (preferred := _scoring_rows(model)) > 0:
        try:
            return kept.take(model, held, preferred, blocks, prefix_sharing=False), preferred
        except _akunu.Error:
            kept.preferred_failed = True
    return kept.take(model, held, rows, blocks, prefix_sharing=False), rows


def _score_windows(model, windows: list[list[int]], max_sequences: int, rows: int, greedy: bool) -> list:
    """score_batch of windows of at most context + 1 ids each."""
    out: list = [None] * len(windows)
    if not windows:
        return []
    held = max(1, min(max_sequences, len(windows)))
    # A window of n ids writes n positions (n - 1 where it fills the context).
    blocks = _pool_blocks([len(w) for w in windows], held)
    batch, rows = _scoring_batch(model, held, rows or 0, blocks)
    waiting = list(range(len(windows)))[::-1]
    index: dict[int, int] = {}
    while waiting or index:
        while waiting and len(index) < held:
            i = waiting.pop()
            index[batch.add(_scored_ids(model, windows[i]), score=True)] = i
        for seq, _token, _logprob in batch.step():
            i = index.pop(seq)
            out[i] = _scored(batch, seq, windows[i], greedy)
            batch.remove(seq)
    model._kept_batches.give_back(batch, rows, prefix_sharing=False)  # not after an error: that batch is dropped
    return out


class KeptBatches:
    """The batches a Model keeps between calls: one that score_batch ran in, and one that
    generate_batch or stream_batch ran in (with prefix sharing). Making a Batch allocates its KV
    pool and records its tables, and freeing it returns the pool: on a GPU that takes a large
    share of a call (bench/NOTES.md, "Scoring batches kept between calls"). A call takes the
    kept batch of its kind where it fits (as many sequences at once or fewer, the same rows a
    step, blocks enough, none in use), else makes one, and gives it back once it has run to the
    end (a call that failed, or a stream left unfinished, drops its batch). A kept batch is in
    the state of a new one: a block's hash goes when the block does, and an emptied batch takes
    its sequences' rows in turn from the first again, so nothing carries over from the call
    before. Two calls at once (threads) each have their own batch.
    Model.release_batches() frees them, and Model.memory_report()["kept_batches"] counts them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[bool, tuple[Batch, int]] = {}  # by prefix sharing: the batch, the rows asked for
        self.preferred_failed = False  # a scoring batch of the preferred rows could not be allocated

    def take(self, model, held: int, rows: int, blocks: int, prefix_sharing: bool) -> Batch:
        with self._lock:
            kept, asked = self._kept.pop(prefix_sharing, (None, None))
        if kept is not None:
            r = kept.memory_report()
            if asked == rows and kept.max_sequences >= held and r["blocks"] >= blocks and r["blocks_used"] == 0:
                return kept
        kept = None  # its pool goes before the new one is allocated
        return Batch(model, max_sequences=held, rows=rows, blocks=blocks, prefix_sharing=prefix_sharing)

    def give_back(self, batch: Batch, rows: int, prefix_sharing: bool) -> None:
        with self._lock:
            self._kept.setdefault(prefix_sharing, (batch, rows))

    def release(self) -> None:
        with self._lock:
            self._kept = {}
            self.preferred_failed = False

    def bytes(self) -> int:
        with self._lock:
            kept = [b for b, _ in self._kept.values()]
        reports = [b.memory_report() for b in kept]
        return sum(int(r["kv_bytes"] + r["recent_bytes"] + r["scratch_bytes"]) for r in reports)


def _scored_ids(model, window: list[int]) -> list[int]:
    """What a scored window runs: all of it, so that every target is a prompt row's, scored on
    the device; a window that fills the context runs all but its last id, which is then the
    target of the row that samples."""
    return window if len(window) <= model.context else window[:-1]


def _scored(batch: Batch, seq: int, window: list[int], greedy: bool):
    """A scored window's log-probabilities and with `greedy` whether each target was its row's
    argmax: the prompt rows' from the device, and where the window filled the context its last
    target's from the sampling row's logits, read back."""
    scores = np.asarray(batch._b.scores(seq), dtype=np.float64)
    flags = np.asarray(batch._b.score_greedy(seq), dtype=bool) if greedy else None
    if len(scores) < len(window) - 1:
        logits, last = batch.logits(seq), window[-1]
        scores = np.append(scores, log_softmax(logits)[last])
        if greedy:
            flags = np.append(flags, int(np.argmax(logits)) == last)
    return (scores, flags) if greedy else scores
