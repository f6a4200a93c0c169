"""Decode (or prefill) speed of model files under several engine settings (tuning keys, or
feature variables such as AKUNU_INT8), one process per setting, printed as one table: what
bench/NOTES.md's A/B tables come from.

    python bench/decode_variants.py FILE... --variant NAME=KEY=VALUE[,KEY=VALUE...] ... [--prefill]

A KEY in capitals (AKUNU_INT8) is an environment variable; any other is a tuning key
(docs/configuration.md), passed through AKUNU_TUNE: `--variant no-handoff=gemv_handoff=0`.

A variant "default" with no settings is always the first row. Each cell is `python -m akunu
bench FILE` (a median of 3 after a warmup). By default with short prompts, so that only decode
is measured: tg128 and, with --deep N, decode after N tokens. With --prefill: pp512 tok/s and the
time to first token of 2,048 tokens (ms), with a short decode.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    name, _, settings = spec.partition("=")
    env, tune = {}, []
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        if key.isupper():
            env[key] = value
        else:
            tune.append(f"{key}={value}")
    if tune:
        env["AKUNU_TUNE"] = ",".join(tune)
    return name, env


def run(files: list[str], env: dict[str, str], deep: int, prefill: bool) -> dict[str, dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        lengths = ["--pp", "512", "--ttft", "2048", "--deep-context", "16", "--tokens", "16"] if prefill else \
            ["--pp", "16", "--ttft", "16", "--deep-context", str(deep), "--tokens", "128"]
        cmd = [sys.executable, "-m", "akunu", "bench", *files, *lengths, "--json", out.name]
        r = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
            return {}
        return {os.path.basename(d["file"]): d for d in json.load(open(out.name))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--variant", action="append", default=[], help="NAME=ENV=VALUE[,ENV=VALUE...]")
    ap.add_argument("--deep", type=int, default=16, help="prompt tokens before the deep decode run")
    ap.add_argument("--prefill", action="store_true", help="measure pp512 and the time to first token of 2,048 tokens")
    args = ap.parse_args()
    variants = [("default", {})] + [parse_variant(v) for v in args.variant]
    names = [os.path.basename(f) for f in args.files]
    if args.prefill:
        print("pp512 tok/s / time to first token of 2,048 tokens (ms)")
        cells = ("pp_tok_s", 1.0, "ttft_s", 1e3)
    else:
        print(f"decode tg128 tok/s (after {args.deep} tokens: second number)")
        cells = ("tg_tok_s", 1.0, "tg_deep_tok_s", 1.0)
    print(f"{'variant':<28}" + "".join(f"{n[:24]:>26}" for n in names), flush=True)
    # A row as each variant finishes: a run stopped at a time limit keeps the rows it measured.
    for name, env in variants:
        row = run(args.files, env, args.deep, args.prefill)
        first, first_scale, second, second_scale = cells
        text = "".join(f"{row[n][first] * first_scale:>14.1f} /{row[n][second] * second_scale:>9.1f}" if n in row
                       else f"{'failed':>26}" for n in names)
        print(f"{name:<28}" + text, flush=True)


if __name__ == "__main__":
    main()
