"""bench/gguf_to_hf.py: a float llama GGUF as an HF checkpoint computes the same logits. The
GGUF rotates adjacent pairs of each head's Q and K rows and the checkpoint pairs (i, i +
head_dim / 2) after the rows are put back in HF's order, so this also holds the two RoPE
pairings (and, on Vulkan, the two forms of the RoPE fold in the Q/K/V GEMV) to each other.

bench/speculative.py: its table has plain decode and each draft's rows, and the target as its
own draft has every proposal accepted."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import akunu
from support.fixture_paths import require
from test_engine_numpy import random_gguf

pytestmark = pytest.mark.usefixtures("backend")
CONVERT = pathlib.Path(__file__).parents[2] / "bench" / "gguf_to_hf.py"
SPECULATIVE = pathlib.Path(__file__).parents[2] / "bench" / "speculative.py"


@pytest.mark.parametrize("wtype", ["f16", "bf16"])
def test_gguf_to_hf_keeps_the_logits(tmp_path_factory, backend, wtype):
    path = random_gguf(tmp_path_factory, wtype)
    hf = path.with_name(f"tiny-{wtype}-hf")
    subprocess.run([sys.executable, str(CONVERT), str(path), str(hf)], check=True, capture_output=True)
    ids = [1, 17, 300, 5, 999, 42, 7]
    logits = []
    for p in (path, hf):
        m = akunu.Model(p, context=64, progress=False)
        decode = np.stack([m.eval([i], reset=False).copy() for i in ids])
        m.reset()
        logits.append((decode, m.eval(ids, all_logits=True, reset=False).copy()))
        if backend != "cpu":  # RoPE and the KV write ride on the Q/K/V GEMV for both pairings
            assert "rope_kv" not in {c["kernel"] for c in m.dispatch_table()}
    scale = np.abs(logits[0][0]).max()
    for a, b in zip(logits[0], logits[1]):
        assert np.abs(a - b).max() <= 1e-4 * scale, f"{wtype}: the checkpoint's logits differ from the GGUF's"
    # Its tokenizer.json (the GGUF's vocabulary, byte fallback, no merges) reads as HF reads it.
    tokenizers = pytest.importorskip("tokenizers")
    text = "abc xyz \u00e9"
    want = tokenizers.Tokenizer.from_file(str(hf / "tokenizer.json")).encode(text).ids
    assert akunu.Tokenizer.from_file(hf).encode(text) == want


def test_speculative_bench_accepts_every_proposal_of_the_target_itself(backend):
    target = require("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")
    draft = require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
    out = subprocess.run([sys.executable, str(SPECULATIVE), str(target), str(draft), "--tokens", "8", "--pp", "5",
                          "--draft-tokens", "2,3", "--runs", "1", "--device", backend],
                         check=True, capture_output=True, text=True).stdout
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r[0].strip() for r in rows] == ["plain decode"] + ["draft: trained-code-llama-q8_0.gguf",
                                                             "draft: the target itself"] * 2
    assert [r[1].strip() for r in rows] == ["-", "2", "2", "3", "3"]
    assert all(float(r[2].replace(",", "")) > 0 for r in rows)
    assert [r[4].strip() for r in rows if "itself" in r[0]] == ["100%", "100%"]
