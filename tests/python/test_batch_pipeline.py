"""akunu.Batch on a model split by layers across devices (engine/batch_pipeline.h, kv_pool.h):
each device holds its layers' part of the KV pool and runs its layers for every row of a step,
the rows cut into micro-batches that run on the devices at once (tuning split_microbatches).

Each test runs the same schedule (sequences joining at staggered steps and leaving after their
own number of tokens, odd batch sizes) on the split model and on one device, and compares:

- two logical devices on one physical device (lavapipe), and the CPU backend twice: the parts
  run the single device's kernels over the same rows, so the tokens are equal and the logits,
  the scores and the KV rows equal bit for bit, as test_split_devices.py holds a split's decode;
  with one micro-batch or two (a micro-batch's GEMMs run fewer rows, each row summed as before).
- a Vulkan + CPU split: tokens equal, logits within the backend tolerance test_split_devices.py
  holds such a split to (max |dlogit| 0.1 on the trained model, mean 5e-3).

A KV format with a recent window (WINDOWED) keeps each sequence's f16 rings on the device of
their layers (kv_pool_recent.h): the split's tokens and logits are the single device's alike.
Its window of 3 is shorter than a micro-batch's 4 rows, so a prompt piece cut between the
halves reads its latest keys from the rows of its own half and the rings the first half wrote.
"""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu._akunu import kernels
from support.fixture_paths import require

PATH = ("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")  # 6 layers, split 3 + 3
PATH_Q8 = ("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf")
BACKEND_TOL, BACKEND_MEAN_TOL = 0.1, 5e-3  # test_split_devices.py BACKEND_TOL for this model
WINDOWED = "q8+w3"  # a KV format with a recent window (kv_format.h)
# max |dlogit| of a CPU step cut into halves (tile_rows' summation order). A quantized format
# with a window rounds more keys to f16 or q8, where a last-bit difference now and then crosses
# a rounding step, so its bound is looser (the Vulkan halves stay bit for bit).
CPU_HALVES_TOL = {"f16": 0.02, WINDOWED: 0.05}
TILE_HALVES_TOL = 0.02  # max |dlogit| where halves run another GEMM kernel than the whole step
SAME_KERNELS = {"vulkan": ["vulkan", "vulkan"], "cpu": ["cpu", "cpu"]}
_models: dict = {}


def model(devices, microbatches=2, context=400, kv_dtype="f16", path=PATH):
    """A model on one device (a str) or split 3 + 3 over `devices`, kept for the module."""
    key = (tuple(devices) if isinstance(devices, list) else devices, microbatches, context, kv_dtype, path)
    if key not in _models:
        where = {"devices": devices, "split": [3, 3]} if isinstance(devices, list) else {"device": devices}
        _models[key] = akunu.Model(require(*path), context=context, progress=False, kv_dtype=kv_dtype,
                                   tuning={"split_microbatches": microbatches}, **where)
    return _models[key]


def prompts(n, vocab, seed=0, lo=1, hi=40):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in rng.integers(3, vocab, size=int(rng.integers(lo, hi)))] for _ in range(n)]


def run(b, all_ids, max_tokens):
    """Sequence i joins at step i (or once a slot is free) and leaves after max_tokens[i]
    tokens; returns each prompt's (token, logprob) pairs and the logits that sampled them."""
    tokens, logits = [[] for _ in all_ids], [[] for _ in all_ids]
    seqs, joined = {}, 0
    while joined < len(all_ids) or seqs:
        if joined < len(all_ids) and len(seqs) < b.max_sequences:
            seqs[b.add(all_ids[joined])] = joined
            joined += 1
        for seq, token, logprob in b.step():
            i = seqs[seq]
            tokens[i].append((token, logprob))
            logits[i].append(b.logits(seq))
            if len(tokens[i]) == max_tokens[i]:
                b.remove(seq)
                del seqs[seq]
    return tokens, logits


def schedule(size, vocab):
    return prompts(size, vocab, seed=size), [2 + (i * 5) % 7 for i in range(size)]


@pytest.mark.parametrize("kv_dtype", ["f16", WINDOWED])
@pytest.mark.parametrize("microbatches", [1, 2, "auto"])
@pytest.mark.parametrize("size", [1, 3, 7])
@pytest.mark.parametrize("backend", ["vulkan", "cpu"])
def test_a_split_batch_gives_the_single_device_tokens_and_logits_bit_for_bit(backend, size, microbatches, kv_dtype):
    """auto: steps of up to 4 rows (half of rows=8) run whole, larger ones in two halves."""
    if (backend == "cpu" or kv_dtype != "f16") and (size == 1 or microbatches == "auto"):
        pytest.skip("the CPU pair and the windowed format run sizes 3 and 7 with 1 and 2 micro-batches; the cut "
                    "is host code that the Vulkan pair covers")
    one, split = model(backend, kv_dtype=kv_dtype), model(SAME_KERNELS[backend], microbatches, kv_dtype=kv_dtype)
    all_ids, max_tokens = schedule(size, one.config.vocab_size)
    # rows=8: the 7-sequence batch's long prompts run in pieces beside decode rows (chunked prefill).
    want = run(akunu.Batch(one, max_sequences=max(1, size - 1), rows=8), all_ids, max_tokens)
    b = akunu.Batch(split, max_sequences=max(1, size - 1), rows=8)
    assert b.memory_report()["microbatches"] == (1 if microbatches == 1 else 2)
    got = run(b, all_ids, max_tokens)
    if backend == "cpu" and microbatches == 2:
        # The CPU backend's short GEMM (tile_rows) sums a row in an order that depends on how many
        # rows share its block, so a half's rows differ from the whole step's in the last bits.
        assert [[t for t, _ in g] for g in got[0]] == [[t for t, _ in w] for w in want[0]]
        diff = np.abs(np.concatenate([np.ravel(g) for g in got[1]]) - np.concatenate([np.ravel(w) for w in want[1]]))
        assert diff.max() <= CPU_HALVES_TOL[kv_dtype] and diff.mean() <= BACKEND_MEAN_TOL
    else:
        assert got[0] == want[0]
        for g, w in zip(got[1], want[1]):
            np.testing.assert_array_equal(np.array(g), np.array(w))
    assert b.memory_report()["blocks_used"] == 0  # every sequence left: its blocks went back


@pytest.mark.parametrize("microbatches", [1, 2, "auto"])
def test_a_split_batch_of_few_row_steps_in_tile_weights(microbatches):
    """Q8_0 tiles on Vulkan: a step of two rows runs the two-row table (the tile GEMV of exactly
    its rows; three and four rows have tables of theirs too), and its halves run the whole
    step's table, so each row is summed alike: bit for bit with one micro-batch and on auto
    (steps of fewer than 16 rows run whole).
    Two micro-batches forced on a step of 5 to 8 rows give halves of at most 4 rows, which run
    the tile GEMV's row window where the whole step runs short tiles: the same tokens, the
    logits within TILE_HALVES_TOL."""
    one = model("vulkan", path=PATH_Q8)
    if kernels.gemm_tile_rows(one.device, kernels.tile_type(one.device, "q8_0")) < 2:
        pytest.skip("this device runs no tile GEMV of several rows, so no few-row tables")
    split = model(SAME_KERNELS["vulkan"], microbatches, path=PATH_Q8)
    all_ids, max_tokens = prompts(6, one.config.vocab_size, seed=11, lo=1, hi=12), [3, 6, 8, 5, 9, 4]
    want = run(akunu.Batch(one, max_sequences=4, rows=32), all_ids, max_tokens)
    got = run(akunu.Batch(split, max_sequences=4, rows=32), all_ids, max_tokens)
    assert [[t for t, _ in g] for g in got[0]] == [[t for t, _ in w] for w in want[0]]
    if microbatches == 2:
        diff = np.abs(np.concatenate([np.ravel(g) for g in got[1]]) - np.concatenate([np.ravel(w) for w in want[1]]))
        assert diff.max() <= TILE_HALVES_TOL
        return
    assert got[0] == want[0]
    for g, w in zip(got[1], want[1]):
        np.testing.assert_array_equal(np.array(g), np.array(w))


@pytest.mark.parametrize("microbatches", [1, 2])
def test_a_vulkan_and_cpu_split_batch_holds_the_backend_tolerance(microbatches):
    one, split = model("vulkan"), model(["vulkan", "cpu"], microbatches)
    all_ids, max_tokens = schedule(3, one.config.vocab_size)
    want = run(akunu.Batch(one, max_sequences=2, rows=8), all_ids, max_tokens)
    got = run(akunu.Batch(split, max_sequences=2, rows=8), all_ids, max_tokens)
    assert [[t for t, _ in g] for g in got[0]] == [[t for t, _ in w] for w in want[0]]
    diff = np.abs(np.concatenate([np.ravel(g) for g in got[1]]) - np.concatenate([np.ravel(w) for w in want[1]]))
    assert diff.max() <= BACKEND_TOL and diff.mean() <= BACKEND_MEAN_TOL


def test_kv_views_read_each_layer_from_its_device():
    """batch.kv_cache(seq).k(layer) of a split batch: each layer's rows from the device that
    holds it, the single device's bit for bit."""
    one, split = model("vulkan"), model(SAME_KERNELS["vulkan"])
    ids = prompts(2, one.config.vocab_size, seed=4, lo=20, hi=30)
    views = []
    for m in (one, split):
        b = akunu.Batch(m, max_sequences=2)
        seqs = [b.add(i) for i in ids]
        b.step()
        b.step()
        views.append([(b.kv_cache(s).k(layer), b.kv_cache(s).v(layer)) for s in seqs
                      for layer in range(m.config.n_layers)])
    for (gk, gv), (wk, wv) in zip(views[1], views[0]):
        np.testing.assert_array_equal(gk, wk)
        np.testing.assert_array_equal(gv, wv)


@pytest.mark.parametrize("kv_dtype", ["f16", WINDOWED])
def test_prefix_sharing_over_a_split_pool(kv_dtype):
    """Four sequences after a 300-token prompt share its full block on both devices' parts of
    the pool (one block table), with the single device's tokens; with a recent window each
    part restores its layers' rings from the block's kept tail."""
    one, split = model("vulkan", kv_dtype=kv_dtype), model(SAME_KERNELS["vulkan"], kv_dtype=kv_dtype)
    prefix = prompts(1, one.config.vocab_size, seed=14, lo=300, hi=301)[0]
    tails = prompts(4, one.config.vocab_size, seed=15, lo=1, hi=5)
    results, reports = [], []
    for m in (one, split):
        b = akunu.Batch(m, max_sequences=4, rows=64)
        first = b.add(prefix + tails[0])
        while not b.step():
            pass
        seqs = [first] + [b.add(prefix + t) for t in tails[1:]]
        toks = {s: [] for s in seqs}
        while min(len(t) for t in toks.values()) < 3:
            for s, t, _ in b.step():
                toks[s].append(t)
        assert all(b.block_table(s)[:1] == b.block_table(first)[:1] for s in seqs)
        reports.append(b.memory_report())
        results.append([toks[s][:3] for s in seqs])
    assert results[1] == results[0]
    assert reports[1]["blocks_shared"] == reports[0]["blocks_shared"] == 1
    assert reports[1]["kv_bytes"] == reports[0]["kv_bytes"]  # the same blocks, their layers on two devices
    assert reports[1]["recent_bytes"] == reports[0]["recent_bytes"]  # each part's rings and tails, its layers'
    assert (reports[0]["recent_bytes"] > 0) == (kv_dtype != "f16")


@pytest.mark.parametrize("microbatches", [1, 2])
def test_score_batch_and_generate_batch_on_a_split(microbatches):
    one, split = model("vulkan"), model(SAME_KERNELS["vulkan"], microbatches)
    seqs = prompts(5, one.config.vocab_size, seed=21, lo=2, hi=50)
    for got, want in zip(split.score_batch(seqs, rows=16), one.score_batch(seqs, rows=16)):
        np.testing.assert_array_equal(got, want)
    assert ([g.token_ids for g in split.generate_batch(seqs, max_tokens=5)] ==
            [g.token_ids for g in one.generate_batch(seqs, max_tokens=5)])


def test_a_split_batch_refuses_what_a_batch_refuses():
    """The errors a batch on one device gives, a split batch gives too, and a micro-batch count
    other than 1 or 2 is named."""
    with pytest.raises(akunu.Error, match="'split_microbatches' takes 1 or 2"):
        akunu.Batch(model(SAME_KERNELS["vulkan"], 3))
    b = akunu.Batch(model(SAME_KERNELS["vulkan"]), max_sequences=2, rows=400, blocks=1)
    b.add(prompts(1, 1000, seed=1, lo=200, hi=201)[0])
    b.add(prompts(1, 1000, seed=2, lo=200, hi=201)[0])
    with pytest.raises(akunu.Error, match="the KV block pool is exhausted"):
        b.step()
    with pytest.raises(akunu.Error, match="out of range"):
        b.add([10**6])


def test_the_batch_bench_runs_a_split_model(capsys):
    """`python -m akunu bench --batch N,M --device A,B`: the batched throughput of a split model."""
    from akunu.__main__ import main

    assert main(["bench", str(require(*PATH)), "--batch", "1,3", "--pp", "8", "--tokens", "3",
                 "--device", "cpu,cpu", "--split", "3,3", "--no-progress"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if "trained-code-llama" in line]
    assert [r[1] for r in rows] == ["1", "3"]


def test_profile_of_a_split_step_times_every_layer():
    """Batch.profile() on a split model: each part's commands of the last step, in layer order,
    so every layer's attention appears once."""
    m = model(["vulkan", "vulkan"], microbatches=1)
    b = akunu.Batch(m, max_sequences=2)
    for ids in prompts(2, m.config.vocab_size, seed=5):
        b.add(ids)
    b.step()
    labels = [r["label"] for r in b.profile()]
    layers = [int(label.split(".")[1]) for label in labels if label.startswith("blk.") and "attn_q" in label]
    assert layers == list(range(m.config.n_layers))
