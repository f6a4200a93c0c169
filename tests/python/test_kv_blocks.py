"""A KV cache grown in blocks of 256 positions (kv_alloc="blocks") against the pre-allocated one:
the same logits bit for bit (decode steps, chains, pipelined chains, prefill chunks across
block boundaries, all-position logits) in every kv_dtype; blocks allocated only when a block
boundary is crossed (ahead of a whole chain); memory growing by blocks as planned; views,
truncate, save/load across layouts and fork. On the CPU backend the block tables hold host
pointers."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

LLAMA = ("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf")
GEMMA = ("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf")
KV_DTYPES = ["f16", "q8", "int4", "fp4", "q8/int4", "q8/fp4", "int4h", "int4h+w4"]
BLOCK = 256


@pytest.fixture(autouse=True)
def scalar_prefill_attention(monkeypatch):
    """Both layouts run the scalar prefill attention: a cache in blocks has no
    cooperative-matrix flash attention (flash_cm reads one f16 buffer), which the preallocated
    f16 cache takes on GPUs that have them, with scores and weights rounded to halves, so its
    logits differ from the scalar kernel's in the last bits. The layouts are what is compared."""
    monkeypatch.setenv("AKUNU_TUNE", "flash_coopmat=0")


def ids_of(n, seed=0):
    return [int(x) for x in np.random.default_rng(seed).integers(3, 2040, size=n)]


def pair(path, **kw):
    kw = {"context": 700, "prefill_chunk": 97, "progress": False, **kw}
    return akunu.Model(require(*path), **kw), akunu.Model(require(*path), kv_alloc="blocks", **kw)


@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
def test_blocks_give_the_preallocated_logits(kv_dtype):
    """A 300-token prompt in chunks of 97 (chunk edges on both sides of position 256), then
    decode steps: every logit equal, and the cache views equal (blocks: gathered copies)."""
    full, blocks = pair(LLAMA, kv_dtype=kv_dtype)
    assert blocks.kv_cache.layers == ["blocks"] * blocks.config.n_layers
    prompt = ids_of(300)
    want = full.eval(prompt, all_logits=True)
    got = blocks.eval(prompt, all_logits=True)
    np.testing.assert_array_equal(got, want)
    for t in ids_of(4, seed=1):
        np.testing.assert_array_equal(blocks.eval([t], reset=False), full.eval([t], reset=False))
    for layer in range(full.config.n_layers):
        np.testing.assert_array_equal(blocks.kv_cache.v(layer), full.kv_cache.v(layer))
        if kv_dtype != "f16":
            np.testing.assert_array_equal(blocks.kv_cache.k_scales(layer), full.kv_cache.k_scales(layer))
            np.testing.assert_array_equal(blocks.kv_cache.k(layer, dequantize=True),
                                          full.kv_cache.k(layer, dequantize=True))


def test_blocks_fold_rope_kv_where_full_rows_do():
    """A decode step's RoPE and KV write ride on the Q/K/V GEMV for a cache in blocks wherever
    they do for the preallocated one (the GEMV's _blocks variant writes through the block
    tables), and not for a format with a recent window, whose newest rows go to the rings."""
    for kv_dtype in ("f16", "int4h+w4"):
        full, blocks = pair(LLAMA, kv_dtype=kv_dtype)
        separate = [{r["label"].split(".")[-1] for r in m.dispatch_table()} >= {"rope_kv"} for m in (full, blocks)]
        assert separate[0] == separate[1]
        fused = [r["kernel"] for r in blocks.dispatch_table() if r["label"].endswith("attn_qkv")]
        if not separate[1]:  # folded: every fused Q/K/V GEMV is the variant that writes blocks
            assert fused and all(k.endswith("_blocks") for k in fused)


@pytest.mark.parametrize("path", [LLAMA, ("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf")])
def test_blocks_with_gemv_hand_offs_give_the_preallocated_logits(path):
    """With the GEMVs handing x off through counters instead of barriers (tuning gemv_handoff=1,
    as on NVIDIA GPUs), the Q/K/V GEMV that writes the blocks (float and tile weights) still
    comes before the attention that reads them: chained decode across position 256 gives the
    preallocated cache's tokens and log-probabilities bit for bit."""
    full, blocks = pair(path, chain=4, tuning="gemv_handoff=1,flash_coopmat=0")
    got, want = (m.generate(ids_of(247), max_tokens=30, stream=False) for m in (blocks, full))
    assert blocks.kv_cache.current_length > BLOCK
    assert list(got.token_ids) == list(want.token_ids)
    np.testing.assert_array_equal(np.array(got.logprobs), np.array(want.logprobs))


def test_chains_and_the_last_row_path_across_a_boundary():
    """Chains (4 steps per submission) and pipelined chains run across position 256; the
    last-row prefill path starts inside the second block."""
    full, blocks = pair(LLAMA, chain=4)
    prompt = ids_of(250)
    np.testing.assert_array_equal(blocks.eval(prompt), full.eval(prompt))
    got = [blocks._engine.decode_chain(blocks._engine.sampled_token()) for _ in range(3)]
    want = [full._engine.decode_chain(full._engine.sampled_token()) for _ in range(3)]
    assert got == want and blocks.kv_cache.current_length == 262
    # Pipelined chains from position 247 on (the next chain is submitted while one runs).
    for m in (full, blocks):
        m.reset()
        m.eval(ids_of(240), reset=False)
    a = list(full.generate(ids_of(7, seed=2), max_tokens=40, reset=False))
    b = list(blocks.generate(ids_of(7, seed=2), max_tokens=40, reset=False))
    assert [p.token_id for p in a] == [p.token_id for p in b] and len(a) > 10
    assert blocks.kv_cache.current_length == full.kv_cache.current_length
    follow = ids_of(20, seed=3)
    np.testing.assert_array_equal(blocks.eval(follow, reset=False), full.eval(follow, reset=False))


def test_blocks_are_allocated_only_at_block_boundaries():
    _, m = pair(LLAMA, chain=4)
    report = m.memory_report()
    block, first = report["kv_block"], report["kv_cache"][1]
    assert block > 0 and report["kv_blocks"] == 1
    allocations = lambda: m.memory_report()["device_allocations"]  # noqa: E731
    before = allocations()
    m.eval(ids_of(250))  # inside block 0
    for t in ids_of(5):
        m.eval([t], reset=False)      # positions 250..254
    assert allocations() == before and m.memory_report()["kv_blocks"] == 1
    m._engine.decode_chain(1)  # positions 255..258: the chain's block exists before it runs
    assert allocations() == before + 1 and m.memory_report()["kv_blocks"] == 2
    for t in ids_of(40):
        m.eval([t], reset=False)
    assert allocations() == before + 1
    m.eval(ids_of(300), reset=False)  # 299 -> 599: block 2, allocated once
    assert allocations() == before + 2 and m.memory_report()["kv_blocks"] == 3
    assert m.memory_report()["kv_cache"][1] == first + 2 * block
    # Rewinding keeps the blocks; growing again into them allocates nothing.
    m.kv_cache.truncate(10)
    m.eval(ids_of(500), reset=False)
    assert allocations() == before + 2


def test_the_plan_shows_both_layouts():
    full, blocks = pair(LLAMA)
    kw = dict(context=700, prefill_chunk=97, max_chain=blocks._engine.chain, check_device=False)
    p_full = akunu.plan(require(*LLAMA), **kw)
    p_blocks = akunu.plan(require(*LLAMA), kv_alloc="blocks", **kw)
    assert p_full.kv_bytes == full.memory_report()["kv_cache"][1] == p_full.kv_max_bytes == p_full.kv_full_bytes
    report = blocks.memory_report()
    assert p_blocks.kv_bytes == report["kv_cache"][0] == report["kv_cache"][1]
    assert p_blocks.kv_block_bytes == report["kv_block"] and p_blocks.kv_max_bytes == report["kv_cache_max"]
    # Three blocks cover 700 positions: 768 rows each of K and V, plus the block tables.
    assert p_blocks.kv_max_bytes - (p_blocks.kv_bytes - p_blocks.kv_block_bytes) == 3 * p_blocks.kv_block_bytes
    assert 3 * p_blocks.kv_block_bytes == p_full.kv_bytes * 768 // 700
    assert "grows per 256 positions" in str(p_blocks) and "2 blocks" in str(p_blocks)
    assert "2 full" in str(p_full)
    with pytest.raises(ValueError, match="kv_alloc"):
        akunu.plan(require(*LLAMA), kv_alloc="paged", check_device=False)
    with pytest.raises(ValueError, match="kv_alloc"):
        akunu.Model(require(*LLAMA), kv_alloc="paged", progress=False)


@pytest.mark.parametrize("kv_dtype", ["f16", "q8/fp4", "int4h+w4"])
def test_state_truncate_and_fork_in_blocks(kv_dtype):
    """States move between the layouts (their rows are in one order), forks continue alike,
    and truncate rewinds across a block boundary."""
    full, blocks = pair(LLAMA, kv_dtype=kv_dtype)
    prompt = ids_of(280)
    blocks.eval(prompt)
    state = blocks.save_state()
    full.eval(ids_of(3, seed=5))
    full.load_state(state)  # blocks -> full
    follow = ids_of(6, seed=4)
    want = np.stack([full.eval([t], reset=False).copy() for t in follow])
    fork = blocks.fork()
    assert fork.kv_cache.layers == ["blocks"] * 2 and fork.kv_cache.current_length == 280
    np.testing.assert_array_equal(np.stack([fork.eval([t], reset=False).copy() for t in follow]), want)
    np.testing.assert_array_equal(np.stack([blocks.eval([t], reset=False).copy() for t in follow]), want)
    # full -> blocks, into a fresh model that allocates the blocks the state needs.
    other = akunu.Model(require(*LLAMA), context=700, prefill_chunk=97, kv_dtype=kv_dtype, kv_alloc="blocks",
                        progress=False)
    other.load_state(full.save_state())
    assert other.memory_report()["kv_blocks"] == 2
    np.testing.assert_array_equal(other.eval([9], reset=False), full.eval([9], reset=False))
    # Rewind from 287 into block 0, then regrow across the boundary.
    for m in (full, blocks):
        m.kv_cache.truncate(200)
    np.testing.assert_array_equal(blocks.eval(ids_of(90, seed=6), all_logits=True, reset=False),
                                  full.eval(ids_of(90, seed=6), all_logits=True, reset=False))


def test_sliding_window_layers_in_blocks():
    """gemma3 (layers 0-4 with a 32-token window): blocks give the pre-allocated logits."""
    full, blocks = pair(GEMMA, context=600, prefill_chunk=61)
    prompt = ids_of(290, seed=7)
    np.testing.assert_array_equal(blocks.eval(prompt, all_logits=True), full.eval(prompt, all_logits=True))
    for t in ids_of(3, seed=8):
        np.testing.assert_array_equal(blocks.eval([t], reset=False), full.eval([t], reset=False))


_LONG_CONTEXT_RUN = """
import resource, sys
import numpy as np
import akunu
path, context = sys.argv[1], int(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
m = akunu.Model(path, context=context, kv_alloc="blocks", progress=False)
logits = [m.eval([1, 5, 7, 9])[-1]] + [m.eval([t])[-1] for t in (3, 4, 5)]
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
np.save(sys.argv[3], np.array(logits))
"""  # run in a fresh process: its peak RSS is the model's


def test_a_long_context_in_blocks_costs_memory_only_for_the_positions_used(tmp_path):
    """kv_alloc="blocks" with a context of 10 million: the block table (every entry written at
    load) and the RoPE tables (every position's cos/sin) used to take 1.3 GB and seconds for a
    tiny model before its first token. Both are now written as positions are reserved; the
    logits equal those of a short pre-allocated context. The CPU backend's memory is mapped
    pages that cost nothing until written, which the peak RSS of a fresh process shows."""

    from support.gguf_bytes import ARR, F32, I32, STR, U32, kv, tiny_llama_gguf
    tokens = ["<unk>", "<s>", "</s>"] + [chr(97 + i) for i in range(13)]
    extra = [kv("llama.context_length", U32, 10_000_000), kv("tokenizer.ggml.model", STR, "llama"),
             kv("tokenizer.ggml.tokens", ARR, (STR, tokens)), kv("tokenizer.ggml.scores", ARR, (F32, [0.0] * 16)),
             kv("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3] + [1] * 13))]
    path = tmp_path / "long.gguf"
    path.write_bytes(tiny_llama_gguf(layers=4, extra=extra))
    # Vulkan devices bind at most so much at once: the RoPE tables of 10 million positions are
    # refused there with an error that says so.
    context = 10_000_000 if os.environ["AKUNU_DEVICE"] == "cpu" else 4_000_000
    run = subprocess.run([sys.executable, "-c", _LONG_CONTEXT_RUN, str(path), str(context), str(tmp_path / "l.npy")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    grown_mib = int(run.stdout.split()[-1])
    short = akunu.Model(str(path), context=64, progress=False)
    want = [short.eval([1, 5, 7, 9])[-1]] + [short.eval([t])[-1] for t in (3, 4, 5)]
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), np.array(want))
    assert grown_mib < 200, f"a model of 4 layers of width 32 grew the peak RSS by {grown_mib} MiB"
