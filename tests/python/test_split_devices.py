"""Models split by layers across devices (engine/split.h, docs/devices.md): the same physical
device opened twice as two logical devices gives the single-device logits bit for bit (every
architecture fixture, decode and all-position eval); a Vulkan + CPU split is held to the
tolerance the suite holds each backend to; generate, hidden states, KV views, save/load state,
truncate and fork work across the parts; bad split specs fail clearly; plan() shows the split."""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu
from support.fixture_paths import FIXTURES, require

# (model, source, layer counts of a two-part split): every architecture of the fixtures, with a
# block format (q8_0) and gemma's HF norms (stored w, scale 1 + w) beside the f16 GGUFs.
SOURCES = [
    ("tiny-llama3-random", "gguf/tiny-llama3-random-f16.gguf", [1, 1]),
    ("tiny-llama3-random", "gguf/tiny-llama3-random-q8_0.gguf", [1, 1]),
    ("tiny-llama3-random", "hf", [1, 1]),
    ("tiny-qwen3-random", "gguf/tiny-qwen3-random-f16.gguf", [1, 1]),
    ("tiny-qwen3-random", "hf", [1, 1]),
    ("tiny-gemma3-random", "gguf/tiny-gemma3-random-f16.gguf", [2, 4]),
    ("tiny-gemma3-random", "hf", [5, 1]),
    ("trained-code-llama", "gguf/trained-code-llama-f16.gguf", [3, 3]),
    ("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf", [4, 2]),
]
IDS = [f"{m}:{s}" for m, s, _ in SOURCES]

# The suite's tolerance for a backend (test_engine.py SOURCES, the fixture README's fp16
# thresholds): max |dlogit| 0.05 against the float64 reference for the random models, 0.1 for the
# trained one, and a mean of 5e-3. A Vulkan + CPU split is held to it against the single-device
# Vulkan run.
BACKEND_TOL = {"trained-code-llama": 0.1}
BACKEND_TOL_DEFAULT, BACKEND_MEAN_TOL = 0.05, 5e-3


def prompt(model, n=24):
    man = json.loads(require(model, "manifest.json").read_text())
    return man["prompts"][0]["ids"][:n]


def logits_of(m, ids):
    """(decode: each token's logits, one step at a time; eval: every position's in one call;
    the prefill's last-position logits)."""
    m.reset()
    decode = np.stack([m.eval([i], reset=False).copy() for i in ids])
    every = m.eval(ids, all_logits=True)
    last = m.eval(ids).copy()
    return decode, every, last


@pytest.mark.parametrize("model, source, counts", SOURCES, ids=IDS)
def test_two_logical_devices_give_the_single_device_logits_bit_for_bit(model, source, counts):
    path = require(model, source)
    ids = prompt(model)
    want = logits_of(akunu.Model(path, context=64, device="vulkan", progress=False), ids)
    m = akunu.Model(path, context=64, devices=["vulkan", "vulkan"], split=counts, progress=False)
    n = m.config.n_layers
    assert [p["layers"] for p in m.parts] == [(0, counts[0]), (counts[0], n)]
    for name, got, ref in zip(("decode", "eval", "prefill"), logits_of(m, ids), want):
        np.testing.assert_array_equal(got, ref, err_msg=name)


@pytest.mark.parametrize("model, source, counts", [SOURCES[0], SOURCES[5]], ids=[IDS[0], IDS[5]])
def test_the_cpu_backend_twice_gives_its_single_device_logits_bit_for_bit(model, source, counts):
    path = require(model, source)
    ids = prompt(model)
    want = logits_of(akunu.Model(path, context=64, device="cpu", progress=False), ids)
    m = akunu.Model(path, context=64, devices=["cpu", "cpu"], split=counts, progress=False)
    for name, got, ref in zip(("decode", "eval", "prefill"), logits_of(m, ids), want):
        np.testing.assert_array_equal(got, ref, err_msg=name)


def test_three_parts_and_a_split_by_proportions():
    """Six layers over three logical devices as [1, 2, 3] layers, and [0.5, 0.5] proportions."""
    path = require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf")
    ids = prompt("tiny-gemma3-random")
    want = logits_of(akunu.Model(path, context=64, device="vulkan", progress=False), ids)
    three = akunu.Model(path, context=64, devices=["vulkan"] * 3, split=[1, 2, 3], progress=False)
    assert [p["layers"] for p in three.parts] == [(0, 1), (1, 3), (3, 6)]
    for got, ref in zip(logits_of(three, ids), want):
        np.testing.assert_array_equal(got, ref)
    halves = akunu.Model(path, context=64, devices=["vulkan", "vulkan"], split=[0.5, 0.5], progress=False)
    assert [p["layers"] for p in halves.parts] == [(0, 3), (3, 6)]
    # No split given: the two logical devices report the same free memory, so equal parts.
    even = akunu.Model(path, context=64, devices=["vulkan", "vulkan"], progress=False)
    assert [p["layers"] for p in even.parts] == [(0, 3), (3, 6)]


@pytest.mark.parametrize("model, source, counts", [SOURCES[0], SOURCES[5], SOURCES[8]], ids=[IDS[0], IDS[5], IDS[8]])
def test_a_vulkan_and_cpu_split_is_within_the_backends_tolerance(model, source, counts):
    path = require(model, source)
    ids = prompt(model)
    want = logits_of(akunu.Model(path, context=64, device="vulkan", progress=False), ids)
    m = akunu.Model(path, context=64, devices=["vulkan", "cpu"], split=counts, progress=False)
    assert [p["device"] for p in m.parts] == [akunu.Device("vulkan").name, akunu.Device("cpu").name]
    tol = BACKEND_TOL.get(model, BACKEND_TOL_DEFAULT)
    for name, got, ref in zip(("decode", "eval", "prefill"), logits_of(m, ids), want):
        err = np.abs(got - ref)
        assert err.max() <= tol, f"{name}: max |dlogit| {err.max():.4f}"
        assert err.mean() <= BACKEND_MEAN_TOL, f"{name}: mean |dlogit| {err.mean():.5f}"


@pytest.fixture(scope="module")
def pair():
    """A single-device model and the same model over two logical devices."""
    path = require("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")
    return (akunu.Model(path, context=96, device="vulkan", progress=False),
            akunu.Model(path, context=96, devices=["vulkan:0", "vulkan"], split=[2, 4], progress=False))


def test_greedy_generate_over_a_split_is_the_single_device_one(pair):
    """generate runs the split's chains step by step (the per-step path); stop tokens rewind."""
    single, split = pair
    assert split.chain == single.chain
    ids = prompt("trained-code-llama", 8)
    want = single.generate(ids, max_tokens=20, stream=False)
    got = split.generate(ids, max_tokens=20, stream=False)
    assert got.token_ids == want.token_ids and got.text == want.text
    np.testing.assert_array_equal(got.logprobs, want.logprobs)
    assert split._engine.kv_length == single._engine.kv_length
    seeded = akunu.Sampler(temperature=0.8, top_k=40, seed=7)
    assert (split.generate(ids, 12, sampler=seeded, stream=False).token_ids ==
            single.generate(ids, 12, sampler=seeded, stream=False).token_ids)


def test_a_split_runs_each_chain_only_when_it_is_asked_for(pair):
    """A split's steps are one submission each, so it does not run ahead: chain_start runs one
    chain and owes the next, chain_next runs an owed chain only when it is called, and the ids
    equal the single device's pipelined chains (two in flight, the same count of chains)."""
    ids = prompt("trained-code-llama", 8)
    runs = []
    for m in pair:
        e = m._engine
        m.eval(ids)
        start = e.kv_length
        e.chain_start(ids[-1])
        lengths, got = [e.kv_length - start], []
        for more in (True, False, False):
            got += e.chain_next(more)[0]
            lengths.append(e.kv_length - start)
        assert e.chain_next(True) is None
        runs.append((got, lengths, e.chain))
    (want, _, chain), (got, lengths, _) = runs
    assert got == want and len(got) == 3 * chain
    assert lengths == [chain, chain, 2 * chain, 3 * chain]


def test_hidden_states_and_kv_views_come_from_the_device_that_holds_the_layer(pair):
    single, split = pair
    ids = prompt("trained-code-llama", 13)
    layers = [0, 1, 2, 5, -1]
    want_logits, want = single.eval(ids, all_logits=True, hidden_states=layers)
    got_logits, got = split.eval(ids, all_logits=True, hidden_states=layers)
    np.testing.assert_array_equal(got_logits, want_logits)
    for layer in layers:
        np.testing.assert_array_equal(got[layer], want[layer], err_msg=f"layer {layer}")
    for layer in range(single.config.n_layers):
        np.testing.assert_array_equal(split.kv_cache.k(layer), single.kv_cache.k(layer))
        np.testing.assert_array_equal(split.kv_cache.v(layer), single.kv_cache.v(layer))
    with pytest.raises(akunu.Error, match="out of range"):
        split.kv_cache.k(6)


def test_state_truncate_and_fork_across_the_parts(pair):
    """A split model's state holds every part's KV rows in layer order, so states move between
    the split and the single-device model; truncate and fork cover every part."""
    single, split = pair
    ids = prompt("trained-code-llama", 12)
    split.eval(ids)
    state = split.save_state()
    single.load_state(state)
    want = single.eval([5], reset=False).copy()
    split.reset()
    split.load_state(state)
    np.testing.assert_array_equal(split.eval([5], reset=False), want)
    split.load_state(single.save_state())  # 13 positions, from the single-device model
    np.testing.assert_array_equal(split.eval([9], reset=False), single.eval([9], reset=False))
    for m in pair:
        m.eval(ids)
        m.kv_cache.truncate(6)
    np.testing.assert_array_equal(split.eval(ids[6:], reset=False), single.eval(ids[6:], reset=False))
    other = split.fork()
    assert [p["layers"] for p in other.parts] == [p["layers"] for p in split.parts]
    np.testing.assert_array_equal(other.eval([7], reset=False), split.eval([7], reset=False))
    assert split.score(ids).shape == (len(ids) - 1,)
    np.testing.assert_array_equal(split.score(ids), single.score(ids))


def test_bad_split_specs_raise_clear_errors():
    path = require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf")  # 2 layers
    cases = [
        ({"devices": ["vulkan"] * 3}, "3 devices needs a layer for each; the model has 2 layers"),
        ({"devices": ["vulkan", "vulkan"], "split": [2, 0]}, "split entry 1 is 0"),
        ({"devices": ["vulkan", "vulkan"], "split": [1]}, "split has 1 entries for 2 devices"),
        ({"devices": ["vulkan", "vulkan"], "split": [0.99, 0.01]}, "gives device 1 none of the model's 2 layers"),
        ({"devices": ["vulkan", "no-such-device"]}, "no-such-device"),
    ]
    for kwargs, message in cases:
        with pytest.raises(akunu.Error, match=message):
            akunu.Model(path, context=32, progress=False, **kwargs)
    with pytest.raises(ValueError, match="either device= or devices="):
        akunu.Model(path, context=32, device="vulkan", devices=["vulkan", "vulkan"], progress=False)
    with pytest.raises(ValueError, match="needs devices"):
        akunu.Model(path, context=32, split=[1, 1], progress=False)
    with pytest.raises(ValueError, match="non-empty list"):
        akunu.Model(path, context=32, devices="vulkan", progress=False)


def test_plan_shows_the_split_and_whether_each_part_fits():
    path = require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf")
    whole = akunu.plan(path, context=64, device="vulkan")
    p = akunu.plan(path, context=64, devices=["vulkan", "cpu"], split=[2, 4])
    assert isinstance(p, akunu.SplitPlan) and p.fits
    assert p.layers == [(0, 2), (2, 6)]
    first, last = p.parts
    assert first.device == akunu.Device("vulkan").name and last.device == akunu.Device("cpu").name
    # Each part holds its layers' KV cache; the embedding is on the first part, the head (tied:
    # the embedding again) and output norm on the last.
    assert first.kv_bytes * 3 == whole.kv_bytes and last.kv_bytes * 3 == 2 * whole.kv_bytes
    assert first.weights_bytes + last.weights_bytes > whole.weights_bytes
    assert max(first.weights_bytes, last.weights_bytes) < whole.weights_bytes
    text = str(p)
    assert "part 0: layers 0 to 1 + embedding on" in text and "part 1: layers 2 to 5 + head on" in text
    assert text.startswith("split plan: gemma3, 6 layers over 2 devices: fits")
    assert first.kv_layers == ["full"] * 2 and "KV cache (2 full)" in text
    # Two logical devices of one physical device share its memory: the plan adds their parts.
    heap = akunu.plan(path, context=64, device="vulkan").device_bytes
    shared = akunu.plan(path, context=64, devices=["vulkan", "vulkan"], split=[3, 3])
    assert shared.fits == (sum(part.total_bytes for part in shared.parts) <= heap)
    # As a model loads it: the same parts.
    m = akunu.Model(path, context=64, devices=["vulkan", "cpu"], split=[2, 4], progress=False)
    assert [part["layers"] for part in m.parts] == p.layers
    assert [part["kv_bytes"] for part in m.parts] == [first.kv_bytes, last.kv_bytes]
    with pytest.raises(akunu.Error, match="split entry 0 is -1"):
        akunu.plan(path, context=64, devices=["vulkan", "cpu"], split=[-1, 7])
    assert FIXTURES.exists()


def test_each_part_records_its_own_tables(pair):
    """The last part's tables start from the residual stream handed in; profile() lists every
    part's commands in layer order, the first part's ending in the hand-off."""
    single, split = pair
    table = split.dispatch_table()
    assert table[0]["label"] == "split_in" and table[-1]["label"] == "sample"
    assert not any(cmd["label"].startswith(("blk.0.", "blk.1.")) for cmd in table)
    assert {cmd["label"] for cmd in table} < {cmd["label"] for cmd in single.dispatch_table()} | {"split_in"}
    labels = [row["label"] for row in split._engine.profile(1)]
    at = len(labels) - 1 - labels[::-1].index("split_out")  # the stream (and a norm handed forward)
    assert labels[0] == "token_embd" and labels[at + 1] == "split_in" and labels[-1] == "sample"
    assert all(not label.startswith("blk.2.") for label in labels[:at])


def test_a_norm_handed_forward_crosses_a_boundary_between_like_devices(pair):
    """Where the single-device decode plan has layer 1's down GEMV hand layer 2's attention norm
    forward, the split at layer 2 hands the normed stream across with the residual stream (three
    copies in, the bitwise test above covers its logits); a Vulkan + CPU split does not."""
    single, split = pair
    if not single.plan()["layers"][1]["down_norm_forward"]:
        pytest.skip(f"{single.device.name}'s decode plan hands no norm forward after layer 1")
    assert split.plan()["layers"][1]["down_norm_forward"]
    assert [cmd["label"] for cmd in split.dispatch_table()[:4]] == ["split_in"] * 3 + ["blk.2.attn_qkv"]
    mixed = akunu.Model(split.path, context=32, devices=["vulkan", "cpu"], split=[2, 4], progress=False)
    assert not mixed.plan()["layers"][1]["down_norm_forward"]
    assert mixed.dispatch_table()[1]["label"] != "split_in"


@pytest.mark.parametrize("kv", [{"kv_alloc": "blocks"}, {"kv_ring": True, "kv_dtype": "q8"},
                                {"kv_alloc": "blocks", "kv_ring": True, "kv_dtype": "q8/int4"}],
                         ids=["blocks", "ring-q8", "blocks-ring-q8/int4"])
def test_kv_layouts_and_formats_split_bit_for_bit(kv):
    """Each part holds its layers of a cache in blocks, in rings (gemma3's sliding layers) or
    quantized; the logits, the cache views and the saved state match the single-device ones."""
    path = require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-f16.gguf")
    ids = prompt("tiny-gemma3-random", 40)
    single = akunu.Model(path, context=64, device="vulkan", prefill_chunk=16, chain=2, progress=False, **kv)
    split = akunu.Model(path, context=64, devices=[0, "vulkan"], split=[3, 3], prefill_chunk=16, chain=2,
                        progress=False, **kv)
    for got, want in zip(logits_of(split, ids), logits_of(single, ids)):
        np.testing.assert_array_equal(got, want)
    assert split.kv_cache.sliding_from == single.kv_cache.sliding_from
    for layer in (0, 5):
        np.testing.assert_array_equal(split.kv_cache.k(layer), single.kv_cache.k(layer))
    assert split.save_state() == single.save_state()


def test_bad_input_to_a_split_model_changes_nothing(pair):
    single, split = pair
    ids = prompt("trained-code-llama", 8)
    split.eval(ids)
    state = split.save_state()
    for bad in ([split.config.vocab_size], [-1], list(range(200))):  # out of range, too long a prompt
        with pytest.raises((akunu.Error, ValueError)):
            split.eval(bad, reset=False)
    with pytest.raises(akunu.Error, match="truncate"):
        split.kv_cache.truncate(9)
    assert split.save_state() == state


@pytest.mark.parametrize("model, source, counts", [("tiny-qwen3-random", "hf", [1, 1]),
                                                   ("trained-code-llama", "gguf/trained-code-llama-q8_0.gguf",
                                                    [1, 4, 1])], ids=["qwen3-hf", "code-llama-q8_0"])
def test_gemv_hand_offs_stay_inside_each_part(model, source, counts):
    """With GEMV hand-offs on (as on NVIDIA; tuning gemv_handoff=1 turns them on here), each part
    has its own counters: no hand-off crosses a boundary, a part's first O GEMV zeroes its last
    layer's slots, a part of one layer hands nothing off, and the logits stay bit for bit."""
    path = require(model, source)
    ids = prompt(model)
    single = akunu.Model(path, context=64, device="vulkan", tuning="gemv_handoff=1", progress=False)
    if not single.plan()["handoffs"]:
        pytest.skip(f"{single.device.name} hands nothing off even with gemv_handoff=1")
    split = akunu.Model(path, context=64, devices=["vulkan"] * len(counts), split=counts, tuning="gemv_handoff=1",
                        progress=False)
    for got, want in zip(logits_of(split, ids), logits_of(single, ids)):
        np.testing.assert_array_equal(got, want)
    assert split.plan()["layers"][-1]["handoffs"] == []  # the last part holds one layer


LLAMA31_8B = {  # a config alone: the plan estimates the weights (test_model_config.py has the figures)
    "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False,
}


def test_a_plan_adds_up_the_parts_that_share_a_device():
    """Parts on logical devices of one physical device share its memory: each may fit alone
    while together they do not; on different devices each part counts alone."""
    whole = akunu.plan(LLAMA31_8B, context=1024, weights_dtype="Q4_0", device="vulkan")
    n = max(2, min(32, -(-whole.total_bytes * 2 // whole.device_bytes)))  # parts of about half the heap
    p = akunu.plan(LLAMA31_8B, context=1024, weights_dtype="Q4_0", devices=["vulkan"] * n)
    assert sum(len(range(*r)) for r in p.layers) == 32
    alone = all(part.total_bytes <= part.device_bytes for part in p.parts)
    together = sum(part.total_bytes for part in p.parts)
    if not alone or together <= whole.device_bytes:
        pytest.skip(f"{whole.device}: no split of this model into {n} parts fits part by part but not in all")
    assert not p.fits and "together they need" in p.parts[0].notes[-1]
    assert "DOES NOT FIT" in str(p)


def test_the_rest_of_generate_over_a_split(pair):
    """Speculative decoding (a split target), n samples (saved states), host-side logprobs and
    perplexity (also batched) give the single-device results, and so does a batch
    (test_batch_pipeline.py holds batches on split models in full)."""
    single, split = pair
    ids = prompt("trained-code-llama", 6)
    draft = akunu.Model(require("trained-code-llama", "gguf", "trained-code-llama-q8_0.gguf"), context=96,
                        device="vulkan", progress=False)
    assert (split.generate(ids, 12, stream=False, draft=draft).token_ids ==
            single.generate(ids, 12, stream=False, draft=draft).token_ids)
    sampler = akunu.Sampler(temperature=0.7, seed=3)
    assert ([g.token_ids for g in split.generate(ids, 8, stream=False, n=2, sampler=sampler)] ==
            [g.token_ids for g in single.generate(ids, 8, stream=False, n=2, sampler=sampler)])
    got, want = split.generate(ids, 8, stream=False, logprobs=3), single.generate(ids, 8, stream=False, logprobs=3)
    assert got.token_ids == want.token_ids and got.top_logprobs == want.top_logprobs
    assert split.perplexity(ids) == single.perplexity(ids)
    assert split.perplexity(ids, batch=True) == single.perplexity(ids, batch=True)
    assert ([g.token_ids for g in split.generate_batch([ids, ids[:3]], 4)] ==
            [g.token_ids for g in single.generate_batch([ids, ids[:3]], 4)])


def test_the_command_line_splits_where_device_names_several(capsys):
    from akunu.__main__ import main

    path = str(require("trained-code-llama", "gguf", "trained-code-llama-f16.gguf"))
    assert main(["plan", path, "--context", "64", "--device", "vulkan,cpu", "--split", "2,4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("split plan: llama, 6 layers over 2 devices") and "part 1: layers 2 to 5 + head" in out
    texts = []
    for device in ("vulkan", "vulkan,vulkan"):
        assert main(["generate", path, "def fib(n):", "--max-tokens", "8", "--context", "64", "--device", device]) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and texts[0].strip()
    assert main(["plan", path, "--device", "vulkan,vulkan", "--split", "6,0"]) == 2
    assert "split entry 1 is 0" in capsys.readouterr().err
