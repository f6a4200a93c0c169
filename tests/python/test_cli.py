"""The command line: each command on a fixture model, and errors as one line (a traceback only
with --debug)."""
from __future__ import annotations

import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

import akunu
from akunu import flops
from support.fixture_paths import require


def _env():
    return dict(os.environ, AKUNU_VALIDATION="0")


def akunu_cli(*args, check=True, stdin=None):
    r = subprocess.run([sys.executable, "-m", "akunu", *args], capture_output=True, text=True, env=_env(), timeout=600,
                       input=stdin)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_plan_and_inspect():
    gguf = str(require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf"))
    out = akunu_cli("plan", gguf, "--context", "512").stdout
    assert "memory plan: qwen3" in out and "fits" in out
    gemma = str(require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf"))
    out = akunu_cli("plan", gemma, "--context", "4096", "--kv-alloc", "blocks", "--kv-ring").stdout
    assert "KV cache (1 blocks, 5 ring)" in out and "grows per 256 positions" in out and "ring rows" in out
    out = akunu_cli("inspect", gguf, "--tensors", "3").stdout
    assert "general.architecture" in out and "blk.0" in out and "more (--tensors N)" in out


def test_generate_streams_the_continuation():
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("generate", gguf, "import numpy as np\n\n\ndef ", "--max-tokens", "6", "--context", "64")
    assert r.stdout.startswith("zeros_like(x)")
    assert "tok/s" in r.stderr and "6 generated" in r.stderr and "(max_tokens)" in r.stderr


def test_generate_samples_with_a_seed_and_perplexity_reads_a_file(tmp_path):
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    args = ["generate", gguf, "def ", "--max-tokens", "8", "--context", "64", "--temperature", "1.0", "--top-k", "20",
            "--seed", "3"]
    a, b = akunu_cli(*args), akunu_cli(*args)
    assert a.stdout == b.stdout and a.stdout.strip()
    text = tmp_path / "code.py"
    text.write_text("import os\n\n\ndef main():\n    print(os.getcwd())\n")
    r = akunu_cli("perplexity", gguf, str(text), "--context", "64")
    ppl = float(r.stdout.split()[1])
    import akunu
    want = akunu.Model(gguf, context=64, progress=False).perplexity(text.read_text())
    assert abs(ppl - want) <= 1e-3 * want, (r.stdout, want)  # the API's figure, printed
    r = akunu_cli("perplexity", gguf, str(tmp_path / "missing.txt"), check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = akunu_cli("generate", gguf, "x", "--top-p", "0", check=False)
    assert r.returncode == 2 and "top_p" in r.stderr


def test_errors_are_one_line_without_debug(tmp_path):
    r = akunu_cli("plan", str(tmp_path / "missing.gguf"), check=False)
    assert r.returncode == 2
    assert r.stderr.startswith("akunu: error:") and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr
    r = akunu_cli("--debug", "plan", str(tmp_path / "missing.gguf"), check=False)
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_info_runs_the_kernel_self_check():
    r = akunu_cli("info")
    assert "kernel self-check" in r.stdout and "all kernels match NumPy" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 100, r.stdout
    assert "lavapipe (Vulkan on CPU)" in r.stdout or "lavapipe" not in akunu.devices()[0]["kind"]


def test_bench_writes_json_and_markdown(tmp_path):
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("bench", gguf, "--pp", "32", "--ttft", "48", "--tokens", "8", "--deep-context", "40", "--runs", "1",
                  "--kv-alloc", "blocks", "--json", str(tmp_path / "b.json"), "--markdown", str(tmp_path / "b.md"))
    rows = json.loads((tmp_path / "b.json").read_text())
    assert len(rows) == 1 and rows[0]["pp_tok_s"] > 0 and rows[0]["tg_tok_s"] > 0 and rows[0]["ttft_s"] > 0
    assert 0 < rows[0]["fraction_of_floor"] < 1.5
    # After 40 tokens the floor is lower (their KV rows are read too), and the fraction is of that floor.
    assert rows[0]["deep_floor_tok_s"] < rows[0]["floor_tok_s"]
    assert rows[0]["deep_fraction_of_floor"] == pytest.approx(rows[0]["tg_deep_tok_s"] / rows[0]["deep_floor_tok_s"])
    assert "| pp32 tok/s |" in (tmp_path / "b.md").read_text() and "trained-code-llama-q8_0.gguf" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 100, r.stdout  # the terminal's table fits
    # The prompts' arithmetic: akunu.flops' operations over the measured times; against a peak given.
    assert rows[0]["pp_tflops"] > 0 and rows[0]["peak_tflops"] is None and "TFLOP/s" in r.stdout
    per_token = flops.token_flops(flops.matrix_weights(gguf), akunu.load_config(gguf), 32) / 32
    expected = per_token * rows[0]["pp_tok_s"] / 1e12
    assert rows[0]["pp_tflops"] == pytest.approx(expected)
    r = akunu_cli("bench", gguf, "--pp", "32", "--ttft", "48", "--tokens", "8", "--deep-context", "40", "--runs", "1",
                  "--peak-tflops", "1000", "--json", str(tmp_path / "c.json"))
    assert json.loads((tmp_path / "c.json").read_text())[0]["peak_tflops"] == 1000 and "f16 tensor peak" in r.stdout
    for batch in ([], ["--batch", "2"]):
        r = akunu_cli("bench", gguf, "--peak-tflops", "-1", *batch, check=False)
        assert r.returncode == 2, r.stderr
        assert "--peak-tflops must be a positive number of TFLOP/s, not -1.0" in r.stderr


def test_bench_table_names_each_files_deep_context_where_they_differ():
    """A file trained for fewer positions runs the deep decode shorter: the header names the
    context where every file shares it, each row names its own where they differ."""
    from akunu import bench

    def result(name, deep):
        return bench.Result(file=f"/m/{name}", device="dev", chain=16, load_s=1.0, weights_bytes=1,
                            kv_bytes_per_position=1, pp_tokens=512, pp_tok_s=1e3, ttft_tokens=2048, ttft_s=1.0,
                            tg_tokens=128, tg_tok_s=100.0, tg_single_tok_s=90.0, deep_context=deep,
                            tg_deep_tok_s=80.0, bandwidth=1e12)
    same = bench.text_table([result("a.gguf", 4096), result("b.gguf", 4096)])
    assert "decode @4096" in same and "80.0 (0%)" in same
    mixed = bench.text_table([result("a.gguf", 4096), result("b.gguf", 3776)])
    assert "decode deep" in mixed and "80.0 @4096" in mixed and "80.0 @3776" in mixed



def test_bench_decode_time_leaves_out_the_rewind_after_it():
    """The decode rate times the steps alone: the rewind that follows them (which rebuilds a
    recent window's ring rows on a quantized cache) is another operation's cost."""
    from akunu import bench

    class Engine:
        chain, kv_length = 4, 10
        calls: list = []

        def chain_start(self, token):
            self.calls.append("start")

        def chain_next(self, more):
            self.calls.append("next")

        def decode(self, token):
            self.calls.append("decode")

        def sampled_token(self):
            return 1

        def truncate(self, n):
            self.calls.append(f"truncate {n}")
            time.sleep(0.3)

    e = Engine()
    for chained in (True, False):
        assert bench._decode(e, 8, chained) < 0.2
    assert e.calls == ["start", "next", "next", "truncate 10"] + ["decode"] * 8 + ["truncate 10"]

def test_profile_sums_the_dispatch_table_by_kernel_class():
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("profile", gguf, "--tokens", "1", "--context", "64")
    assert "gemv" in r.stdout and "attention" in r.stdout and "total" in r.stdout
    r = akunu_cli("profile", gguf, "--tokens", "33", "--context", "64")
    assert "gemm" in r.stdout and "flash" in r.stdout
    r = akunu_cli("profile", gguf, "--tokens", "999", "--context", "64", check=False)
    assert r.returncode == 2 and "prefill chunk" in r.stderr
    r = akunu_cli("profile", gguf, "--after", "40", "--context", "64")
    assert "one decode step after 40 tokens" in r.stdout and "attention" in r.stdout
    r = akunu_cli("profile", gguf, "--after", "64", "--context", "64", check=False)
    assert r.returncode == 2 and "need 65 positions; the context holds 64" in r.stderr
    r = akunu_cli("profile", gguf, "--context", "64", "--runs", "0", check=False)
    assert r.returncode == 2 and "runs must be at least 1" in r.stderr
    r = akunu_cli("profile", gguf, "--context", "64", "--by", "label", "--runs", "2")
    assert "(median of 2 runs)" in r.stdout
    # The table's rows: after the title and the header, up to its total (devices that report
    # kernel statistics print them below it).
    lines = r.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if " calls " in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("total"))
    calls = {line.split()[0]: int(line.split()[1]) for line in lines[head + 1:end + 1]}
    assert max(len(line) for line in lines[1:]) <= 100, r.stdout  # under the line with the file's path
    r = akunu_cli("profile", gguf, "--runs", "1")  # the default context: within the trained 512 positions
    assert "akunu: warning" not in r.stderr and "gemv" in r.stdout
    n_layers = int(akunu.open(gguf).metadata["llama.block_count"])
    qkv = "attn_qkv" if "attn_qkv" in calls else "attn_q"  # one dispatch for Q, K and V where weights are in tiles
    assert calls[qkv] == calls["ffn_down"] == calls["attention"] == n_layers, r.stdout
    assert calls["output"] == calls["sample"] == 1 and not any(k.startswith("blk.") for k in calls), r.stdout


def test_profile_takes_each_commands_median_over_runs():
    """Model.profile(runs=N): the rows of the first run, each command's ms the median of N."""
    times = iter([[3.0, 9.0], [1.0, 7.0], [2.0, 8.0]])

    class Engine:
        def profile(self, tokens):
            return [{"label": f"c{i}", "kernel": "k", "ms": t, "bytes_bound": 0} for i, t in enumerate(next(times))]

    class Fake:
        _engine = Engine()

    rows = akunu.Model.profile(Fake(), tokens=1, runs=3)
    assert [(r["label"], r["ms"]) for r in rows] == [("c0", 2.0), ("c1", 8.0)]
    with pytest.raises(ValueError, match="runs must be at least 1"):
        akunu.Model.profile(Fake(), runs=0)


def test_profile_table_sums_rows_by_kernel_or_by_layer_step():
    rows = [{"label": f"blk.{i}.attn_q", "kernel": "gemv_q8_0", "ms": 0.5, "bytes_bound": 1_200_000} for i in range(3)]
    rows.append({"label": "output", "kernel": "gemv_f16", "ms": 0.5, "bytes_bound": 2 * 10**6})
    by_kernel, by_label = akunu.profile_table(rows).splitlines(), akunu.profile_table(rows, by="label").splitlines()
    assert by_kernel[1].split() == ["gemv", "4", "2.000", "100.0%", "3"]
    assert by_label[1].split() == ["attn_q", "3", "1.500", "75.0%", "2"]
    assert by_label[2].split() == ["output", "1", "0.500", "25.0%", "4"]
    with pytest.raises(ValueError, match="by must be 'kernel' or 'label'"):
        akunu.profile_table(rows, by="layer")


def test_bench_measures_the_lengths_asked_for_and_says_when_it_cuts_one(tmp_path):
    """A model trained for 512 positions: --pp 512 measures pp512; lengths past 512 are cut, loudly."""
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("bench", gguf, "--pp", "512", "--ttft", "2048", "--tokens", "8", "--deep-context", "40", "--runs",
                  "1", "--device", "cpu", "--json", str(tmp_path / "b.json"))
    row = json.loads((tmp_path / "b.json").read_text())[0]
    assert (row["pp_tokens"], row["ttft_tokens"], row["deep_context"]) == (512, 512, 40)
    assert "akunu: warning:" in r.stderr and "trained for 512 positions: --ttft 2048 -> 512" in r.stderr, r.stderr
    assert "chain(s)" not in r.stderr  # 8 tokens are two chains of 4 on the CPU backend
    r = akunu_cli("bench", gguf, "--pp", "8", "--ttft", "8", "--tokens", "4", "--deep-context", "8", "--runs", "1",
                  "--device", "cpu")
    assert "--tokens 4 decodes 4 tokens, 1 chain(s) of 4 steps" in r.stderr, r.stderr  # none in flight beside it
    r = akunu_cli("plan", gguf, "--context", "8192")
    assert "context 512" in r.stdout and "context 8192 clipped to 512" in r.stderr


def test_main_job_offline_completes_code_with_the_shipped_model(tmp_path):
    """No command: the main job. --offline (or PyPI out of reach) uses models/ and streams."""
    r = akunu_cli("--offline", "--max-tokens", "12")
    assert "trained-code-llama-q8_0.gguf" in r.stdout and "--offline" in r.stdout
    assert "def fibonacci(n):" in r.stdout and "tok/s" in r.stdout and "12 generated" in r.stdout


def test_chat_needs_a_chat_template():
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("chat", gguf, "--context", "64", check=False, stdin="hi\n")
    assert r.returncode == 2 and "no chat template" in r.stderr and "Traceback" not in r.stderr


def test_chat_keeps_the_cache_between_turns(tmp_path):
    template = tmp_path / "chatml.jinja"
    template.write_text("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    hf = str(require("tiny-qwen3-random", "hf"))
    r = akunu_cli("--device", "cpu", "chat", hf, "--context", "256", "--max-tokens", "6", "--chat-template",
                  str(template), stdin="def add(a, b):\nand subtract?\n\n")
    prefilled = [int(n) for n in re.findall(r"prefilled (\d+) new tokens", r.stderr)]
    assert len(prefilled) == 2 and prefilled[1] < prefilled[0] + 6, r.stderr


@pytest.mark.parametrize("command", [["plan"], ["inspect"], ["generate", "{model}", "hi"], ["chat"],
                                     ["perplexity", "{model}", "{text}"], ["bench"], ["profile"], ["kv-quality"]])
def test_every_model_command_fails_clearly_on_a_missing_or_bad_file(tmp_path, command):
    """A missing file and a file that is not a model are one-line errors naming the file."""
    text = tmp_path / "t.txt"
    text.write_text("x = 1\n")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    for model in (tmp_path / "missing.gguf", bad):
        args = [a.format(model=model, text=text) for a in command]
        if len(args) == 1:
            args.append(str(model))
        r = akunu_cli(*args, check=False, stdin="")
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("akunu: error:") and model.name in r.stderr and "Traceback" not in r.stderr


def test_kv_quality_compares_formats_on_a_text(tmp_path):
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    text = tmp_path / "code.py"
    text.write_text("".join(f"def f{i}(x):\n    return x * {i} + {i * i}\n\n\n" for i in range(40)))
    r = akunu_cli("kv-quality", gguf, "--text", str(text), "--tokens", "200", "--context", "64", "--kv-dtype", "f16",
                  "q8", "q8/int4")
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"f16", "q8", "q8/int4"}, r.stdout
    ppl = {k: float(v.split("|")[3]) for k, v in rows.items() if k != "kv_dtype"}
    import akunu
    ids = akunu.Tokenizer.from_file(gguf).encode(text.read_text())[:200]
    want = math.exp(-akunu.Model(gguf, context=64, progress=False).score(ids).mean())
    assert abs(ppl["f16"] - want) <= 1e-3 * want  # the f16 row is plain perplexity
    assert ppl["q8/int4"] != ppl["f16"]
    assert "tokens on llvmpipe" in r.stdout or "lavapipe" not in akunu.devices()[0]["kind"], r.stdout
    cpu = akunu_cli("kv-quality", gguf, "--text", str(text), "--tokens", "100", "--context", "64", "--kv-dtype", "q8",
                    "--device", "cpu")  # --device after the command, honoured by every model it loads
    assert "tokens on akunu CPU" in cpu.stdout, cpu.stdout
    assert " / " not in r.stdout + r.stderr  # piped: no line per window, only the table
    bar = akunu_cli("kv-quality", gguf, "--text", str(text), "--tokens", "100", "--context", "64", "--kv-dtype", "q8",
                    "--device", "cpu", "--progress")
    assert "kv-quality:" in bar.stderr and "/99 " in bar.stderr, bar.stderr  # one bar over the 99 scored tokens


def test_device_goes_before_or_after_the_command():
    """--device before the command and after it; after it, it wins."""
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    for args in (["--device", "cpu", "plan", gguf], ["plan", gguf, "--device", "cpu"],
                 ["--device", "vulkan", "plan", gguf, "--device", "cpu"]):
        assert "akunu CPU" in akunu_cli(*args).stdout, args
    out = akunu_cli("--device", "cpu", "devices").stdout
    assert "device: [" in out and "akunu CPU backend" in out and "why: asked for: device 'cpu'" in out


def test_version():
    r = akunu_cli("--version")
    assert r.stdout.strip() == f"akunu {akunu.__version__}"
    pyproject = (pathlib.Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'version = "{akunu.__version__}"' in pyproject


def test_a_prompt_longer_than_the_context_is_refused():
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("generate", gguf, "x = 1\n" * 200, "--context", "64", check=False)
    assert r.returncode == 2 and "does not fit" in r.stderr and "Traceback" not in r.stderr


def test_devices_and_the_small_benchmarks():
    assert "subgroup size" in akunu_cli("devices").stdout
    tokenizer = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    assert "MB/s" in akunu_cli("tokenizer-bench", tokenizer).stdout


def test_kernel_bench_reads_at_decode_sizes():
    """`kernel-bench --read`: the copy row, then each size chained and overlapping, with times."""
    out = akunu_cli("kernel-bench", "--read").stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("read ")]
    assert len(rows) == 14 and any("copy kernel" in line for line in out.splitlines())
    assert [r[-5] for r in rows[::2]] == ["chained"] * 7 and [r[-5] for r in rows[1::2]] == ["overlapping"] * 7
    assert all(float(r[-3]) > 0 for r in rows)  # us
