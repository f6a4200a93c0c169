"""akunu's CPU backend and llama.cpp's on the same GGUF files, side by side: prefill of a random
prompt (pp) and greedy decode of N tokens after it (tg), in tok/s.

    python bench/llamacpp_cpu.py FILE... [--pp 512] [--tokens 128] [--rounds 5] [--threads 2]
                                 [--variant NAME=KEY=VALUE[,KEY=VALUE...]] [--no-llama] [--cpu-time]
                                 [--llama-bench PATH]

llama.cpp runs through llama-cpp-python when it is installed, else through a `llama-bench`
binary (`--llama-bench`, default ~/.cache/akunu-build/llama.cpp/llama-bench when present; a
static CPU build of llama.cpp's own benchmark, see bench/README.md). llama-bench times its
tests itself: pp as `-p PP -n 0`, tg as `-p 0 -n N -d PP` (decode after PP positions), one
repetition per round. With --cpu-time its rows are the child process's CPU time, less that of a
run that loads the model and evaluates one token (`-p 1 -n 0`), and for tg less a pp run too.

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


class LlamaBench:
    """llama.cpp's own llama-bench, one process per measurement (it cannot stay loaded)."""

    def __init__(self, binary: str, path: str, threads: int, pp: int):
        self.binary, self.path, self.threads, self.pp = binary, path, threads, pp
        self._null = None

    def _run(self, *test: str) -> tuple[float, float]:
        """(seconds llama-bench timed, CPU seconds of the child) of one test."""
        import json
        import resource
        import subprocess

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([self.binary, "-m", self.path, "-t", str(self.threads), "-r", "1", "--no-warmup",
                              "-o", "json", *test], check=True, capture_output=True, text=True).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return json.loads(out)[0]["avg_ns"] / 1e9, cpu

    def null_cpu(self) -> float:
        if self._null is None:
            self._null = min(self._run("-p", "1", "-n", "0")[1] for _ in range(3))
        return self._null

    def timed_prefill(self) -> float:
        wall, cpu = self._run("-p", str(self.pp), "-n", "0")
        self.last_pp_cpu = cpu - self.null_cpu()
        return self.last_pp_cpu if CLOCK is time.process_time else wall

    def timed_decode(self, tokens: int) -> float:
        wall, cpu = self._run("-p", "0", "-n", str(tokens), "-d", str(self.pp))
        return cpu - self.null_cpu() - self.last_pp_cpu if CLOCK is time.process_time else wall


CLOCK = time.perf_counter


def _timed(f, *args) -> float:
    t0 = CLOCK()
    f(*args)
    return CLOCK() - t0


def bench_file(path: str, args, variants: list[tuple[str, dict]]) -> None:
    context = args.pp + args.tokens + 16
    engines = [(name, Akunu(path, context, tuning)) for name, tuning in variants]
    bench_bin = None
    if llama_cpp is not None and not args.no_llama:
        engines.append(("llama.cpp", LlamaCpp(path, context, args.threads, args.pp)))
    elif args.llama_bench and not args.no_llama:
        bench_bin = LlamaBench(args.llama_bench, path, args.threads, args.pp)
        times_bin = ([], [])
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
        if bench_bin is not None:
            times_bin[0].append(bench_bin.timed_prefill())
            times_bin[1].append(bench_bin.timed_decode(args.tokens))
    if bench_bin is not None:
        times["llama.cpp"] = times_bin
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
    default_bin = os.path.expanduser("~/.cache/akunu-build/llama.cpp/llama-bench")
    ap.add_argument("--llama-bench", default=default_bin if os.path.exists(default_bin) else None,
                    help="llama.cpp's llama-bench binary, used when llama-cpp-python is not installed")
    args = ap.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    if llama_cpp is None and not args.llama_bench and not args.no_llama:
        print("neither llama-cpp-python nor a llama-bench binary: akunu only (bench/README.md)", file=sys.stderr)
    variants = [("akunu", {})] + [parse_variant(v) for v in args.variant]
    for path in args.files:
        bench_file(path, args, variants)


if __name__ == "__main__":
    main()
