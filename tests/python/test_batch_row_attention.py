"""A batched step's rows outside the query tiles attend in attention_split's layout on Vulkan
devices (attention_split.comp built with KV_BATCH; tuning batch_row_attention, 0: attention_rows).

Sequences at very different lengths (1, 2, 63, 65, 257 and 300 prompt tokens: one, two and
three chunks of 256 keys, boundaries one row either side) share each step. The split kernel's
batch against the same batch on attention_rows: the steps differ only in the order the keys
are summed, so every logit agrees within SAME_ROWS_TOL of the largest on CPU-type devices
(lavapipe sums each row alike in every GEMM) and the batch's LOGIT_TOL elsewhere; greedy
tokens equal a solo run's. In every KV format, with a recent window (whose prompt rows take the
split kernel too, seeing the step's earlier rows) and a sliding window (gemma3). The kernel
against a float64 softmax over each row's blocks: tests/cpp/test_batch_row_attention.cpp.
"""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from test_batch import LOGIT_TOL, load, run_staggered, solo

LENGTHS = [1, 2, 63, 65, 257, 300]
SAME_ROWS_TOL = 1e-4  # of max |logit|: the same rows, keys summed in another order
# A quantized cache: the other order can round one of a later layer's K or V codes the other way
# (measured: 1.0e-4 once, for q8/int4+w16; 1e-6 elsewhere).
SAME_CODES_TOL = 1e-3


def with_lengths(vocab, seed=0):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in rng.integers(3, vocab, size=n)] for n in LENGTHS]


def attention_kernels(b):
    return {c["kernel"] for c in b.dispatch_table() if c["kernel"].startswith(("attention_split", "attention_rows"))}


def logits_by_step(m, all_ids, steps):
    """Each sequence's logits after each step in which it sampled, prompts first, then `steps`
    decode steps of everyone; and the batch's attention kernels."""
    b = akunu.Batch(m, max_sequences=len(all_ids), rows=64)
    seqs = [b.add(ids) for ids in all_ids]
    out = {s: [] for s in seqs}
    taken = 0
    while taken < steps:
        rows = b.step()
        for seq, _, _ in rows:
            out[seq].append(b.logits(seq).copy())
        taken += len(rows) == len(seqs)
    return [out[s] for s in seqs], attention_kernels(b)


@pytest.fixture
def vulkan(monkeypatch):
    """The Vulkan device: the CPU backend keeps its attention_rows twin."""
    if akunu.devices()[0]["backend"] != "vulkan":
        pytest.skip("no Vulkan device: the split kernel is for Vulkan devices")
    monkeypatch.setenv("AKUNU_DEVICE", "vulkan")


@pytest.mark.parametrize("arch, kv_dtype", [("llama", "f16"), ("llama", "q8"), ("llama", "int4h"),
                                            ("llama", "q8/fp4"), ("llama", "q8/int4+w16"), ("gemma3", "f16")])
def test_split_rows_match_attention_rows(vulkan, arch, kv_dtype):
    split = load(arch, kv_dtype=kv_dtype)
    rows = load(arch, kv_dtype=kv_dtype, tuning={"batch_row_attention": False})
    all_ids = with_lengths(split.config.vocab_size, seed=len(kv_dtype))
    got, kernels = logits_by_step(split, all_ids, steps=3)
    want, rows_kernels = logits_by_step(rows, all_ids, steps=3)
    assert kernels and all(k.startswith("attention_split") and k.endswith(("_batch", "_batch_recent"))
                           for k in kernels), kernels
    assert rows_kernels and all(k.startswith("attention_rows") for k in rows_kernels), rows_kernels
    same_rows = SAME_ROWS_TOL if kv_dtype == "f16" else SAME_CODES_TOL
    tol = same_rows if split.device.profile["type"] == "cpu" else LOGIT_TOL
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w) > 0
        for step, (a, e) in enumerate(zip(g, w)):
            err = np.abs(a - e).max() / np.abs(e).max()
            assert err <= tol, f"sequence of {LENGTHS[i]} tokens, step {step}: {err:.2e} of max |logit|"


@pytest.mark.parametrize("kv_dtype", ["f16", "int4", "q8/int4+w16"])
def test_split_rows_greedy_equals_solo(vulkan, kv_dtype):
    """Sequences join a step at a time and leave after different numbers of tokens."""
    m = load(kv_dtype=kv_dtype)
    all_ids = with_lengths(m.config.vocab_size, seed=7)
    max_tokens = [5, 3, 6, 4, 5, 3]
    want = [solo(m, ids, n) for ids, n in zip(all_ids, max_tokens)]
    b = akunu.Batch(m, max_sequences=4, rows=48)
    assert run_staggered(b, all_ids, max_tokens) == want
    assert any(k.startswith("attention_split") for k in attention_kernels(b))
