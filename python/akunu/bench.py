"""The benchmark harness: prompt and decode speed of model files, against the bandwidth floor.

For each file it measures, each as the median of `runs` runs after a warmup:
  load        seconds to load the model warm: a second load after the measurements, with the
              file in the page cache and the pipelines in the driver's shader cache (the
              first load, which may compile every pipeline, is kept as load_first_s);
  pp512       prompt tokens/s over a 512-token prompt (batched prefill);
  ttft        time to first token for a long prompt (prefill, then the sampled token read);
  tg          decode tokens/s after a short prompt: pipelined chains (the product path) and one
              submission per token;
  tg@ctx      decode tokens/s after `deep_context` prompt tokens (attention reads a long cache).
The floor is bytes per token (every weight once plus the KV rows attended) over the copy
bandwidth measured by the device-copy kernel in the same run. The prompts' arithmetic is given as
TFLOP/s (akunu.flops: two operations per weight a token crosses, plus attention) beside the
device's dense f16 tensor peak where it is known (flops.TENSOR_PEAKS, or --peak-tflops). Results
are JSON and Markdown.

    python -m akunu bench FILE... [--json out.json] [--markdown out.md] [--peak-tflops 989]
"""
from __future__ import annotations

import gc
import json
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from akunu import _progress, flops, kernel_bench
from akunu._inputs import ContextWarning
from akunu.model import Model
from akunu.plan import load_config


def copy_bandwidth(device) -> float:
    """Bytes/s of the copy kernel over 1 GiB (read + write; 64 MiB on a CPU device)."""
    row = kernel_bench.copy_row(device, scale=1.0 if device.profile["type"] != "cpu" else 1 / 16)
    return row.gb_per_s * 1e9


@dataclass
class Result:
    file: str
    device: str
    chain: int
    load_s: float            # warm: the second load
    weights_bytes: int
    kv_bytes_per_position: int
    pp_tokens: int
    pp_tok_s: float
    ttft_tokens: int
    ttft_s: float
    tg_tokens: int
    tg_tok_s: float          # pipelined chains
    tg_single_tok_s: float   # one submission per token
    deep_context: int
    tg_deep_tok_s: float
    bandwidth: float         # bytes/s, copy kernel
    floor_tok_s: float = 0.0
    fraction_of_floor: float = 0.0
    deep_floor_tok_s: float = 0.0       # the floor after deep_context tokens (their KV rows read too)
    deep_fraction_of_floor: float = 0.0
    load_first_s: float = 0.0
    pp_tflops: float = 0.0    # the pp prompt's operations over its time (akunu.flops)
    ttft_tflops: float = 0.0  # the TTFT prompt's
    peak_tflops: float | None = None  # the device's dense f16 tensor peak, where known
    extra: dict = field(default_factory=dict)


def _median(f, runs: int, warmup_s: float = 0.5) -> float:
    # Warm up for a while, not once: after a load the GPU idles at low clocks, and one 40 ms
    # chunk did not bring them up (pp512 of one file read 11.8k and 13.4k tok/s in two runs).
    start = time.perf_counter()
    f()
    while time.perf_counter() - start < warmup_s:
        f()
    return statistics.median(f() for _ in range(runs))


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def _decode(e, tokens: int, chained: bool) -> float:
    """Seconds of `tokens` greedy steps after what the cache holds. The rewind after them is not
    timed: a cache with a recent window rebuilds the ring rows the steps overwrote, which is the
    cost of a rewind, not of decoding."""
    start = e.kv_length
    t0 = time.perf_counter()
    if chained and e.chain > 1:
        chains = max(1, tokens // e.chain)
        e.chain_start(1)
        for n in range(chains):
            e.chain_next(n + 2 < chains)
    else:
        token = 1
        for _ in range(tokens):
            e.decode(token)
            token = e.sampled_token()
    seconds = time.perf_counter() - t0
    e.truncate(start)
    return seconds


def run(path: str, bandwidth: float, *, pp: int = 512, ttft: int = 2048, tg: int = 128, deep: int = 4096,
        runs: int = 3, device=None, chain: int = 0, kv_alloc: str = "full", kv_ring: bool = False,
        kv_dtype: str = "f16", peak_tflops: float | None = None, step=lambda what: None) -> Result:
    """Measures one file; step(what) is called as each of STEPS begins. peak_tflops: the tensor
    peak to report the prompts' TFLOP/s against (None: flops.tensor_peak's for the device)."""
    rng = np.random.default_rng(0)
    # The prompts fit the context the model was trained for (4096 for llama2), and the deep run
    # leaves room for its decode; a length cut to fit says so (ContextWarning), and the table
    # shows the lengths measured.
    trained = load_config(path).max_context
    context = min(max(pp, ttft, deep + 2 * tg + 64), trained)
    asked = {"pp": pp, "ttft": ttft, "deep-context": deep}
    pp, ttft, deep = min(pp, context), min(ttft, context), min(deep, context - 2 * tg - 64)
    cut = [f"--{name} {n} -> {got}" for (name, n), got in zip(asked.items(), (pp, ttft, deep)) if got < n]
    if cut:
        warnings.warn(f"{path} was trained for {trained} positions: {', '.join(cut)}", ContextWarning, stacklevel=2)
    if deep < 1:
        raise ValueError(f"{path}: {trained} positions leave no room for --tokens {tg} after a prompt; "
                         "ask for fewer --tokens")

    def load():
        return Model(path, context=context, device=device, progress=False, chain=chain, kv_alloc=kv_alloc,
                     kv_ring=kv_ring, kv_dtype=kv_dtype)
    step("load")
    t0 = time.perf_counter()
    m = load()
    load_first = time.perf_counter() - t0
    e, c = m._engine, m.config
    vocab = c.vocab_size
    ids = lambda n: rng.integers(0, vocab, n).tolist()  # noqa: E731

    def prefill(n):
        prompt = ids(n)

        def once():
            e.reset()
            t = _timed(lambda: e.eval(prompt))
            e.sampled_token()
            return t
        return _median(once, runs)

    step(f"pp{pp}")
    pp_s = prefill(pp)
    step(f"ttft {ttft}")
    ttft_s = prefill(ttft)
    e.reset()
    e.eval(ids(16))
    tokens = max(e.chain, tg // max(e.chain, 1) * max(e.chain, 1))
    if tokens < 2 * e.chain:
        warnings.warn(f"{path}: --tokens {tg} decodes {tokens} tokens, {tokens // e.chain} chain(s) of {e.chain} "
                      f"steps: with none in flight beside it, the decode rate includes a submission and a wait; "
                      f"ask for --tokens {2 * e.chain} or more for the chained rate", stacklevel=2)
    step("decode")
    tg_s = _median(lambda: _decode(e, tokens, True), runs)
    step("decode, 1 submit/token")
    single_s = _median(lambda: _decode(e, tokens, False), runs)
    step(f"decode after {deep}")
    e.reset()
    e.eval(ids(deep))
    deep_s = _median(lambda: _decode(e, tokens, True), runs)

    report = m.memory_report()
    weights = report["weights"][1]
    kv_row = report["kv_cache_max"] / context  # K and V of every layer for one position, in kv_dtype
    device_name, model_chain = m.device.name, e.chain
    # The warm load, with the first model's memory released before it.
    m = e = None  # the first model is released before the warm load
    gc.collect()
    step("warm load")
    t0 = time.perf_counter()
    again = load()
    load_warm = time.perf_counter() - t0
    del again
    gc.collect()
    r = Result(file=path, device=device_name, chain=model_chain, load_s=load_warm, load_first_s=load_first,
               weights_bytes=weights, kv_bytes_per_position=kv_row, pp_tokens=pp, pp_tok_s=pp / pp_s, ttft_tokens=ttft,
               ttft_s=ttft_s,
               tg_tokens=tokens, tg_tok_s=tokens / tg_s, tg_single_tok_s=tokens / single_s, deep_context=deep,
               tg_deep_tok_s=tokens / deep_s, bandwidth=bandwidth)
    # Bytes per token: every weight once, plus the KV rows attended (on average over the run).
    r.floor_tok_s = bandwidth / (weights + kv_row * (16 + tokens / 2))
    r.fraction_of_floor = r.tg_tok_s / r.floor_tok_s
    r.deep_floor_tok_s = bandwidth / (weights + kv_row * (deep + tokens / 2))
    r.deep_fraction_of_floor = r.tg_deep_tok_s / r.deep_floor_tok_s
    weights_n = flops.matrix_weights(path)
    r.pp_tflops = flops.token_flops(weights_n, c, pp) / pp_s / 1e12
    r.ttft_tflops = flops.token_flops(weights_n, c, ttft) / ttft_s / 1e12
    r.peak_tflops = flops.tensor_peak(device_name, peak_tflops)
    return r


STEPS = 7  # the step() calls of run()


def text_table(results: list[Result]) -> str:
    """The terminal's table, within 100 columns; the JSON and the Markdown hold every column."""
    r0 = results[0]
    # The deep run's context goes in the header where every file shares it, else in each row
    # (a file trained for fewer positions runs it shorter).
    shared = all(r.deep_context == r0.deep_context for r in results)
    header = ["file", "load s", f"pp{r0.pp_tokens} tok/s", "TFLOP/s", f"TTFT{r0.ttft_tokens} ms",
              "decode (floor)", f"decode @{r0.deep_context}" if shared else "decode deep"]
    rows = [[r.file.rsplit("/", 1)[-1], f"{r.load_s:.2f}", f"{r.pp_tok_s:,.0f}",
             flops.share(r.pp_tflops, r.peak_tflops), f"{r.ttft_s * 1e3:,.1f}",
             f"{r.tg_tok_s:,.1f} ({r.fraction_of_floor:.0%})",
             f"{r.tg_deep_tok_s:,.1f}{'' if shared else f' @{r.deep_context}'} ({r.deep_fraction_of_floor:.0%})"]
            for r in results]
    return f"{r0.device}; floor: bytes per token / {r0.bandwidth / 1e9:,.1f} GB/s (copy kernel){_peak_note(r0)}\n" + \
        _progress.table(header, rows)


def _peak_note(r: Result) -> str:
    return f"; TFLOP/s (of the {r.peak_tflops:,.0f} f16 tensor peak)" if r.peak_tflops else ""


def markdown(results: list[Result]) -> str:
    if not results:
        return ""
    r0 = results[0]
    lines = [f"Device: {r0.device}; floor = bytes per token / {r0.bandwidth / 1e12:.2f} TB/s (copy kernel, same "
             f"run){_peak_note(r0)}.",
             "", f"| file | load s, warm (first) | pp{r0.pp_tokens} tok/s | TFLOP/s | TTFT {r0.ttft_tokens} ms "
             "| TFLOP/s | decode tok/s (chain) | "
             f"1 submit/token | floor tok/s | of floor | decode after a long prompt (of its floor) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        name = r.file.rsplit("/", 1)[-1]
        lines.append(f"| {name} | {r.load_s:.2f} ({r.load_first_s:.2f}) | {r.pp_tok_s:,.0f} | "
                     f"{flops.share(r.pp_tflops, r.peak_tflops)} | {r.ttft_s * 1e3:,.1f} | "
                     f"{flops.share(r.ttft_tflops, r.peak_tflops)} | "
                     f"{r.tg_tok_s:,.1f} (K={r.chain}) | {r.tg_single_tok_s:,.1f} | {r.floor_tok_s:,.0f} | "
                     f"{r.fraction_of_floor:.0%} | {r.tg_deep_tok_s:,.1f} @{r.deep_context} "
                     f"({r.deep_fraction_of_floor:.0%}) |")
    return "\n".join(lines)


def main(files: list[str], device=None, json_path: str | None = None, markdown_path: str | None = None,
         progress: bool | None = None, **kwargs) -> list[Result]:
    """Benches each file and prints the table. progress: a bar over the steps (None: on a terminal
    or in a notebook); where none is shown, each file's row is printed as it finishes."""
    from akunu import Device
    flops.tensor_peak("", kwargs.get("peak_tflops"))  # a bad --peak-tflops fails before any run
    bandwidth = copy_bandwidth(Device(device) if device is not None else Device())
    results = []
    show = _progress.shown(progress)
    bar = _progress.bar(len(files) * STEPS, "bench", "step", show)
    for f in files:
        name = f.rsplit("/", 1)[-1]

        def step(what, name=name):
            bar.set_description(f"{name}: {what}")
            bar.update(1)
        results.append(run(f, bandwidth, device=device, step=step, **kwargs))
        write(results, json_path, markdown_path)  # after each file: a run cut off keeps what it measured
        if not show:  # a log line per file where no bar shows progress
            print("\n".join(text_table(results[-1:]).splitlines()[2:]), flush=True)  # its row, wrapped or not
    bar.close()
    print(text_table(results))
    return results


def write(results: list[Result], json_path: str | None, markdown_path: str | None) -> None:
    if json_path:
        with open(json_path, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(markdown(results) + "\n")
