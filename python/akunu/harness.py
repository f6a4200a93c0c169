"""akunu as a model of EleutherAI's lm-evaluation-harness (lm_eval): `--model akunu`.

    python -m akunu.harness --model akunu --model_args path=model.gguf,device=cpu --tasks hellaswag
    lm_eval.simple_evaluate(model="akunu", model_args="path=org/name", tasks=[...])  # after import akunu.harness

lm_eval finds its models in a registry filled by imports, and has no plugin hook, so `akunu`
is registered when this module is imported; `python -m akunu.harness` imports it and then runs
lm_eval's own command line with the arguments given (every lm_eval option works).

The model follows lm_eval's `hf` model wherever the results depend on it: the same
tokenization (TemplateLM's context/continuation split, BOS as the tokenizer adds it), the same
rolling windows for loglikelihood_rolling, greedy generate_until cut at the `until` strings and
at EOS. With batch_size 1 requests run one at a time, and a request whose context starts like
the one before reuses the KV cache of the common prefix. With batch_size N > 1 (or "auto": 16)
they run N at a time in an akunu.Batch: loglikelihood requests with each distinct context run
once and its continuations forked from it (akunu.batch_scoring), generate_until requests through
Model.generate_batch, grouped by their until strings and max_gen_toks. Greedy generations are
the same tokens either way; loglikelihoods agree within the batch's tolerance (docs/batch.md).

model_args: path (or pretrained: a file, folder or Hugging Face repo id), device, context
(default 2048: lm_eval's max_length), gguf_file, max_gen_toks (default 256), kv_dtype,
batch_size (lm_eval's --batch_size fills it in).
"""
from __future__ import annotations

import sys

import numpy as np
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

import akunu
from akunu.batch_scoring import score_continuations
from akunu.controls import log_softmax


@register_model("akunu")
class AkunuLM(TemplateLM):
    def __init__(self, path: str | None = None, pretrained: str | None = None, device: str | None = None,
                 context: int = 2048, gguf_file: str | None = None, max_gen_toks: int = 256, kv_dtype: str = "f16",
                 batch_size=1, **unused):
        super().__init__()
        name = path or pretrained
        if not name:
            raise ValueError("the akunu model needs path= (a model file, folder or Hugging Face repo id)")
        self.model = akunu.Model(name, context=int(context), device=device or None, gguf_file=gguf_file,
                                 kv_dtype=kv_dtype)
        self.tokenizer = self.model.tokenizer
        self.max_gen_toks = int(max_gen_toks)
        self.batch_size = _batch_size(batch_size)
        self._cached: list[int] = []  # the ids the KV cache holds

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None):
        from lm_eval.utils import simple_parse_args_string

        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None):
        """model_args first; lm_eval's own options (--device, --batch_size) fill in what they do
        not name. A torch device name (cuda, cuda:0, mps) means akunu's default device."""
        args = dict(arg_dict)
        for key, value in (additional_config or {}).items():
            if value is not None and key not in args:
                args[key] = value
        if str(args.get("device", "")).startswith(("cuda", "mps")):
            args["device"] = None
        return cls(**args)

    # ---- tokens --------------------------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_id
        return bos if bos is not None else self.tokenizer.eos_id

    @property
    def max_length(self) -> int:
        return self.model.context

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        if add_special_tokens is None:  # as the hf model: no second BOS before text that has one
            bos = self.tokenizer.bos_token
            add_special_tokens = not (bos and string.startswith(bos))
        return self.tokenizer.encode(string, add_special_tokens)

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens)

    # ---- scoring -------------------------------------------------------------------------------
    def _logits(self, inp: list[int], rows: int) -> np.ndarray:
        """The logits of the last `rows` positions of inp [rows, vocab], reusing the KV cache of
        the common prefix with the ids run before (but never the positions asked for)."""
        keep = 0
        for a, b in zip(self._cached, inp[: len(inp) - rows]):
            if a != b:
                break
            keep += 1
        self.model.kv_cache.truncate(keep)
        self._cached = self._cached[:keep]
        logits = self.model.eval(inp[keep:], all_logits=True, reset=False)
        self._cached = list(inp)
        return logits[-rows:]

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        scored = self._scored if self.batch_size > 1 else self._scored_one_by_one
        todo = [(n, (ctx + cont)[-(self.max_length + 1):], len(cont)) for n, (_, ctx, cont) in enumerate(requests)
                if cont]
        out = [(0.0, True)] * len(requests)  # the context's tokens took the continuation in: nothing to score, as hf
        for (n, _, _), result in zip(todo, scored([(ids, k) for _, ids, k in todo])):
            out[n] = result
            if requests[n][0] is not None:
                self.cache_hook.add_partial("loglikelihood", requests[n][0], result)
        return out

    def _scored_one_by_one(self, items: list[tuple[list[int], int]]) -> list[tuple[float, bool]]:
        """(log p of the last k ids, whether each was the argmax) for each (ids, k), one at a time."""
        out = []
        for ids, k in items:
            lp = log_softmax(self._logits(ids[:-1], k))
            cont = np.asarray(ids[-k:])
            out.append((float(lp[np.arange(k), cont].sum()), bool((lp.argmax(axis=1) == cont).all())))
        return out

    def _scored(self, items: list[tuple[list[int], int]]) -> list[tuple[float, bool]]:
        """As _scored_one_by_one, batch_size sequences at a time in an akunu.Batch, each distinct
        context run once and its continuations forked from it (akunu.batch_scoring)."""
        runs = score_continuations(self.model, [(ids[:-k], ids[-k:]) for ids, k in items],
                                   max_sequences=self.batch_size)
        return [(float(lp.sum()), bool(greedy.all())) for lp, greedy in runs]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        strings = [r.args[0] for r in requests]
        windows = [[make_disjoint_window(w) for w in get_rolling_token_windows(
            token_list=self.tok_encode(string), prefix_token=self.prefix_token_id, max_seq_len=self.max_length,
            context_len=1)] for string in strings]
        scores = iter(self._loglikelihood_tokens([(None, ctx, cont) for ws in windows for ctx, cont in ws]))
        out = []
        for string, ws in zip(strings, windows):
            total = sum(next(scores)[0] for _ in ws)
            out.append(total)
            self.cache_hook.add_partial("loglikelihood_rolling", (string,), total)
        return out

    # ---- generation ----------------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        eos = self.tok_decode([self.eot_token_id], skip_special_tokens=False)
        jobs = []
        for context, gen_kwargs in [r.args for r in requests]:
            kwargs = normalize_gen_kwargs(dict(gen_kwargs), self.max_gen_toks)
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
            max_gen = kwargs.pop("max_gen_toks")
            if max_gen >= self.max_length:
                raise ValueError(f"max_gen_toks {max_gen} must be below the model's context {self.max_length}")
            ids = self.tok_encode(context)[-(self.max_length - max_gen):]
            sampler = akunu.Sampler(temperature=float(kwargs.get("temperature", 0.0) or 0.0),
                                    top_p=float(kwargs.get("top_p", 1.0) or 1.0), seed=int(kwargs.get("seed", 0) or 0))
            jobs.append((ids, tuple(until), max_gen, sampler))
        out = []
        for (context, gen_kwargs), (_, until, _, _), g in zip([r.args for r in requests], jobs, self._generated(jobs)):
            text = postprocess_generated_text(self.tok_decode(g.token_ids), list(until), None)
            out.append(text)
            self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
        return out

    def _generated(self, jobs: list[tuple]) -> list:
        """The Generation of each (ids, until, max_gen, sampler): one at a time, or with
        batch_size > 1 through generate_batch, a batch per (until, max_gen)."""
        if self.batch_size == 1:
            self._cached = []  # generate resets the cache
            return [self.model.generate(ids, max_tokens=max_gen, sampler=sampler, stream=False, stop=list(until))
                    for ids, until, max_gen, sampler in jobs]
        out: list = [None] * len(jobs)
        groups: dict[tuple, list[int]] = {}
        for n, (_, until, max_gen, _) in enumerate(jobs):
            groups.setdefault((until, max_gen), []).append(n)
        for (until, max_gen), members in groups.items():
            gens = self.model.generate_batch([jobs[n][0] for n in members], max_tokens=max_gen,
                                             sampler=[jobs[n][3] for n in members], stop=list(until),
                                             max_sequences=self.batch_size)
            for n, g in zip(members, gens):
                out[n] = g
        return out


def _batch_size(value) -> int:
    """lm_eval's batch_size: an int >= 1, or "auto" (16; "auto:N" too)."""
    text = str(value if value is not None else 1)
    if text.startswith("auto"):
        return 16
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"batch_size must be an integer >= 1 or 'auto', got {value!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    """lm_eval's command line with the akunu model registered."""
    from lm_eval.__main__ import cli_evaluate

    sys.argv = [sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))
    cli_evaluate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
