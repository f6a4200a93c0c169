"""akunu's CPU backend and llama.cpp's (llama-cpp-python) on the same GGUF files, side by side:
prefill of a random prompt (pp) and greedy decode of N tokens after it (tg), in tok/s.

    python bench/llamacpp_cpu.py FILE... [--pp 512] [--tokens 128] [--rounds 5] [--threads 2]
                                 [--variant NAME=KEY=VALUE[,KEY=VALUE...]] [--no-llama] [--cpu-time]

Every engine stays loaded; each round measures pp then tg once per engine, the engines
interleaved, so that a noisy machine's load falls on all of them alike; the table gives each
engine's median over the rounds and its ratio to llama.cpp. `--variant` adds akunu models
created with those tuning keys (docs/configuration.md), e.g. `--variant before=cpu_q5_tiles=0`,
for before/after comparisons with one binary. The load average is printed with the results.
On a machine shared with other work, `AKUNU_THREADS=1 ... --threads 1 --cpu-time` rates each
engine by the process's CPU time rather than the wall clock, which the others' load moves less.

llama-cpp-python is optional (scripts/install.sh notes how to build its wheel once); without
it only akunu's rows are printed.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

try:
    import llama_cpp
except ImportError:  # the reference is optional
    llama_cpp = None


class Akunu:
    def __init__(self, path: str, context: int, tuning: dict):
        import akunu
        self.m = akunu.Model(path, device="cpu", context=context, progress=False, tuning=tuning or None)
        self.e = self.m._engine

    def prefill(self, prompt: list[int]) -> None:
        self.e.reset()
        self.e.eval(prompt)
        self.e.sampled_token()

    def decode(self, tokens: int) -> None:
        token = self.e.sampled_token()
        for _ in range(tokens):
            self.e.decode(token)
            token = self.e.sampled_token()


class LlamaCpp:
    def __init__(self, path: str, context: int, threads: int, batch: int):
        self.m = llama_cpp.Llama(model_path=path, n_ctx=context, n_batch=batch, n_ubatch=batch, n_threads=threads,
                                 n_threads_batch=threads, verbose=False)

    def prefill(self, prompt: list[int]) -> None:
        self.m.reset()
        self.m.eval(prompt)

    def decode(self, tokens: int) -> None:
        # Greedy: the argmax of the last token's logits (Llama.scores is filled only with
        # logits_all, which would make every prompt position compute logits).
        vocab = self.m.n_vocab()
        for _ in range(tokens):
            logits = np.ctypeslib.as_array(self.m._ctx.get_logits(), shape=(vocab,))
            self.m.eval([int(np.argmax(logits))])


CLOCK = time.perf_counter


def _timed(f, *args) -> float:
    t0 = CLOCK()
    f(*args)
    return CLOCK() - t0


def bench_file(path: str, args, variants: list[tuple[str, dict]]) -> None:
    context = args.pp + args.tokens + 16
    engines = [(name, Akunu(path, context, tuning)) for name, tuning in variants]
    if llama_cpp is not None and not args.no_llama:
        engines.append(("llama.cpp", LlamaCpp(path, context, args.threads, args.pp)))
    vocab = engines[0][1].m.config.vocab_size
    prompt = np.random.default_rng(0).integers(0, vocab, args.pp).tolist()
    times = {name: ([], []) for name, _ in engines}
    for _, eng in engines:  # warmup
        eng.prefill(prompt[:64])
        eng.decode(4)
    for _ in range(args.rounds):
        for name, eng in engines:
            times[name][0].append(_timed(eng.prefill, prompt))
            times[name][1].append(_timed(eng.decode, args.tokens))
    rates = {name: (args.pp / statistics.median(p), args.tokens / statistics.median(t))
             for name, (p, t) in times.items()}
    ref = rates.get("llama.cpp")
    print(f"{os.path.basename(path)}  (load average {' '.join(f'{v:.2f}' for v in os.getloadavg())})")
    for name, (pp, tg) in rates.items():
        ratio = f"  {pp / ref[0]:5.2f}x {tg / ref[1]:5.2f}x" if ref else ""
        print(f"  {name:<24} pp{args.pp} {pp:8.1f} tok/s   tg{args.tokens} {tg:7.1f} tok/s{ratio}", flush=True)


def parse_variant(spec: str) -> tuple[str, dict]:
    name, _, settings = spec.partition("=")
    return name, dict(item.split("=", 1) for item in filter(None, settings.split(",")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--pp", type=int, default=512, help="prompt tokens")
    ap.add_argument("--tokens", type=int, default=128, help="decode tokens after the prompt")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are reported")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("AKUNU_THREADS", "2")),
                    help="llama.cpp's threads (akunu's: AKUNU_THREADS)")
    ap.add_argument("--variant", action="append", default=[], help="NAME=KEY=VALUE[,KEY=VALUE...]: akunu tuning")
    ap.add_argument("--no-llama", action="store_true", help="akunu only")
    ap.add_argument("--cpu-time", action="store_true", help="rate by the process's CPU time (one thread each)")
    args = ap.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    if llama_cpp is None and not args.no_llama:
        print("llama-cpp-python is not installed: akunu only (scripts/install.sh)", file=sys.stderr)
    variants = [("akunu", {})] + [parse_variant(v) for v in args.variant]
    for path in args.files:
        bench_file(path, args, variants)


if __name__ == "__main__":
    main()
