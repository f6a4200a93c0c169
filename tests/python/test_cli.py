"""The command line: each command on a fixture model, and errors as one line (a traceback only
with --debug)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fixture_paths import require


def akunu_cli(*args, check=True):
    env = dict(os.environ, AKUNU_VALIDATION="0")
    r = subprocess.run([sys.executable, "-m", "akunu", *args], capture_output=True, text=True, env=env, timeout=600)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_plan_and_inspect():
    gguf = str(require("tiny-qwen3-random", "gguf", "tiny-qwen3-random-q8_0.gguf"))
    out = akunu_cli("plan", gguf, "--context", "512").stdout
    assert "memory plan: qwen3" in out and "fits" in out
    out = akunu_cli("inspect", gguf, "--tensors", "3").stdout
    assert "general.architecture" in out and "blk.0" in out and "more (--tensors N)" in out


def test_generate_streams_the_continuation():
    gguf = str(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"))
    r = akunu_cli("generate", gguf, "import numpy as np\n\n\ndef ", "--max-tokens", "6", "--context", "64")
    assert r.stdout.startswith("zeros_like(x)")
    assert "tok/s" in r.stderr


def test_errors_are_one_line_without_debug(tmp_path):
    r = akunu_cli("plan", str(tmp_path / "missing.gguf"), check=False)
    assert r.returncode == 2
    assert r.stderr.startswith("akunu: error:") and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr
    r = akunu_cli("--debug", "plan", str(tmp_path / "missing.gguf"), check=False)
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_main_job_without_arguments():
    r = akunu_cli()
    assert "kernel self-check" in r.stdout and "all kernels match NumPy" in r.stdout
