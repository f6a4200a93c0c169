"""Model state: truncate's bounds, save_state/load_state (a restored model continues bit for
bit as an uninterrupted one, and bad or foreign states are refused with the state kept), and
fork() (a second model on the same weights, independent of the first)."""
from __future__ import annotations

import gc
import os
import struct

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

# Every test here runs on each backend (conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

LLAMA_F16 = ("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf")
LLAMA_Q8 = ("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf")
CODE = ("trained-code-llama", "gguf", "trained-code-llama-f16.gguf")
PROMPT = "import numpy as np\n\n\ndef "
# (temperature, top_k, top_p, min_p, seed): greedy, and sampling keyed by (seed, position)
SAMPLERS = {"greedy": (0.0, 0, 1.0, 0.0, 0), "seeded": (1.1, 40, 0.95, 0.01, 2026)}

_MODELS = {}


def model(parts, context=96):
    key = (parts, context, os.environ.get("AKUNU_DEVICE"))
    if key not in _MODELS:
        _MODELS[key] = akunu.Model(require(*parts), context=context, progress=False)
    return _MODELS[key]


def steps(m, n):
    """n single decode steps, each feeding the token sampled before it: the ids, their
    logprobs and the logits each was sampled from (starting with the state's own)."""
    e = m._engine
    ids, logprobs, logits = [], [], []
    for _ in range(n):
        ids.append(e.sampled_token())
        logprobs.append(e.sampled_logprob())
        logits.append(m.scratch["logits"].copy())
        e.decode(ids[-1])
    return ids, np.array(logprobs), np.stack(logits)


def kv_snapshot(m):
    n = m.config.n_layers
    rows = [m.kv_cache.k(i).copy() for i in range(n)] + [m.kv_cache.v(i).copy() for i in range(n)]
    return m.kv_cache.current_length, rows


def assert_same_kv(a, b):
    assert a[0] == b[0]
    for x, y in zip(a[1], b[1]):
        np.testing.assert_array_equal(x, y)


def assert_same_run(a, b):
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])


def test_truncate_past_the_length_raises():
    m = model(LLAMA_F16)
    m.reset()
    m.eval([1, 2, 3])
    with pytest.raises(akunu.Error, match=r"truncate\(5\): the cache holds 3 positions"):
        m.kv_cache.truncate(5)
    with pytest.raises(akunu.Error, match=r"truncate\(-1\)"):
        m.kv_cache.truncate(-1)
    assert m.kv_cache.current_length == 3
    m.kv_cache.truncate(3)
    m.kv_cache.truncate(0)
    assert m.kv_cache.current_length == 0


@pytest.mark.parametrize("sampler", SAMPLERS, ids=list(SAMPLERS))
def test_a_restored_state_continues_bit_identically(sampler, tmp_path):
    """Save after a prompt, run 24 steps; reset, set another sampler, run another prompt; load
    the state (from bytes, and from a file): the same 24 ids, logprobs and logits, bit for bit."""
    m = model(CODE, context=128)
    e = m._engine
    m.reset()
    e.set_sampler(*SAMPLERS[sampler])
    m.eval(m.tokenize(PROMPT))
    state = m.save_state()
    m.save_state(tmp_path / "state.bin")
    want = steps(m, 24)
    if sampler == "seeded":
        assert len(set(want[0])) > 5  # it did sample

    for source in (state, tmp_path / "state.bin", str(tmp_path / "state.bin")):
        m.reset()
        e.set_sampler(0.7, 10, 0.9, 0.0, 99)
        m.eval(m.tokenize("class Foo:\n    def"), reset=False)
        m.load_state(source)
        assert m.kv_cache.current_length == len(m.tokenize(PROMPT))
        assert_same_run(steps(m, 24), want)


def test_a_state_of_an_empty_cache_round_trips():
    m = model(LLAMA_F16)
    m.reset()
    state = m.save_state()
    want = m.eval([5, 6, 7]).copy()
    m.eval([8], reset=False)
    m.load_state(state)
    assert m.kv_cache.current_length == 0
    np.testing.assert_array_equal(m.eval([5, 6, 7], reset=False), want)


@pytest.mark.parametrize("sampler", SAMPLERS, ids=list(SAMPLERS))
def test_fork_continues_as_the_original_and_independently(sampler):
    m = model(CODE, context=128)
    e = m._engine
    m.reset()
    e.set_sampler(*SAMPLERS[sampler])
    prompt = m.tokenize(PROMPT)
    m.eval(prompt)
    saved = m.save_state()
    before = m.memory_report()
    f = m.fork()
    after = m.memory_report()
    assert f.kv_cache.current_length == len(prompt)
    assert_same_kv(kv_snapshot(f), kv_snapshot(m))

    # Decoding the original (other tokens at the same positions) leaves the fork unchanged ...
    fork_kv = kv_snapshot(f)
    m.eval(m.tokenize(" while True:")[1:], reset=False)
    assert_same_kv(kv_snapshot(f), fork_kv)
    got = steps(f, 20)
    # ... and the fork's steps leave the original's cache unchanged.
    original_kv = kv_snapshot(m)
    m.load_state(saved)
    want = steps(m, 20)
    assert_same_run(got, want)
    assert original_kv[0] > len(prompt)

    # The weights are shared: the fork allocated its KV cache and scratch only (a second
    # upload would add the weights' bytes, more than the 10 % allowed for alignment).
    added = after["device_allocated"] - before["device_allocated"]
    assert before["fork"] <= added <= 1.1 * before["fork"]
    assert 0.1 * before["fork"] < after["weights"][1]
    assert after["weight_sharers"] == f.memory_report()["weight_sharers"] == 2
    assert f.memory_report()["kv_cache"] == m.memory_report()["kv_cache"]
    del f
    gc.collect()
    assert m.memory_report()["weight_sharers"] == 1


def test_a_fork_outlives_its_original():
    m = akunu.Model(require(*LLAMA_F16), context=64, progress=False)
    m.eval([1, 2, 3, 4])
    want = steps(m.fork(), 5)
    f = m.fork()
    del m
    gc.collect()
    assert_same_run(steps(f, 5), want)
    assert f.memory_report()["weight_sharers"] == 1


def test_plan_names_what_a_fork_adds():
    m = model(LLAMA_F16)
    plan = akunu.plan(require(*LLAMA_F16), context=m.context, prefill_chunk=m.prefill_chunk, max_chain=m.chain,
                      check_device=False)
    report = m.memory_report()
    per_fork = sum(report[p][1] for p in ("kv_cache", "decode_scratch", "prefill_scratch"))
    assert plan.fork_bytes == report["fork"] == per_fork
    assert plan.total_bytes == plan.weights_bytes + plan.fork_bytes
    assert "each fork() adds" in str(plan)


# ---- bad states ------------------------------------------------------------------------------
HEADER = 80  # bytes before the payload (model_state.h)


def _set(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _flip(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0x40
    return bytes(out)


def bad_states(state: bytes) -> dict[str, tuple[bytes, str]]:
    """{case: (bytes, the error they must raise)} from a good state."""
    return {
        "empty": (b"", "not an akunu state: 0 bytes"),
        "magic": (b"AKUNUSTATF" + state[10:], "does not start with \"AKUNUSTATE\""),
        "version": (_set(state, 12, "<I", 2), "state format version 2, but this akunu reads version 1"),
        "truncated": (state[:-100], "truncated or has trailing bytes"),
        "trailing": (state + b"\0", "truncated or has trailing bytes"),
        "header only": (state[:HEADER], "truncated or has trailing bytes"),
        "payload size": (_set(state, 56, "<Q", 2**63), "truncated or has trailing bytes"),
        "payload byte": (_flip(state, len(state) // 2), "checksum mismatch: the state is damaged"),
        "header byte": (_flip(state, 44), "checksum mismatch"),
        "checksum": (_flip(state, len(state) - 1), "checksum mismatch"),
    }


def test_bad_states_are_refused_and_change_nothing(tmp_path):
    m = model(LLAMA_F16)
    m.reset()
    m.eval([7, 8, 9, 10, 11])
    state = m.save_state()
    m.eval([12, 13], reset=False)
    kept, logits = kv_snapshot(m), m.scratch["logits"].copy()
    for case, (data, message) in bad_states(state).items():
        with pytest.raises(akunu.Error, match=message):
            m.load_state(data)
        assert_same_kv(kv_snapshot(m), kept)
        np.testing.assert_array_equal(m.scratch["logits"], logits, err_msg=case)
    path = tmp_path / "damaged.state"
    path.write_bytes(bad_states(state)["payload byte"][0])
    with pytest.raises(akunu.Error, match=f"{path.name}: load_state: checksum mismatch"):
        m.load_state(path)
    m.load_state(state)  # the good one still loads
    assert m.kv_cache.current_length == 5


def test_states_of_other_models_are_refused():
    """Same shape, other weights (f16 vs q8_0 of one model); another shape; a context too short
    for the saved length. Each says what differs, and the state is kept."""
    q8 = model(LLAMA_Q8)
    q8.reset()
    q8.eval([1, 2])
    kept = kv_snapshot(q8)
    f16 = model(LLAMA_F16)
    f16.reset()
    f16.eval([3, 4, 5])
    with pytest.raises(akunu.Error,
                       match="saved by a different model of the same shape .* load it into the model that saved it"):
        q8.load_state(f16.save_state())
    code = model(CODE, context=128)
    code.reset()
    code.eval([3, 4, 5])
    with pytest.raises(akunu.Error, match="saved by a model with n_layers 6, this one has 2"):
        q8.load_state(code.save_state())
    assert_same_kv(kv_snapshot(q8), kept)

    f16.eval([6, 7], reset=False)
    five = f16.save_state()
    short = model(LLAMA_F16, context=4)
    short.reset()
    with pytest.raises(akunu.Error, match="holds 5 positions but this model's context is 4; load the model with a "
                                          "context of at least 5"):
        short.load_state(five)
    assert short.kv_cache.current_length == 0


def test_the_fingerprint_tells_models_apart():
    """Two loads of one file agree; other files of the same model (q8_0, safetensors) do not."""
    f16 = model(LLAMA_F16)
    again = akunu.Model(require(*LLAMA_F16), context=32, progress=False)
    assert f16._engine.fingerprint == again._engine.fingerprint
    hf = model(("tiny-llama3-random", "hf"))
    assert len({f16._engine.fingerprint, model(LLAMA_Q8)._engine.fingerprint, hf._engine.fingerprint}) == 3
    f16.reset()
    f16.eval([1, 2, 3])
    again.load_state(f16.save_state())  # another context, the same model: fine
    assert again.kv_cache.current_length == 3
    assert_same_run(steps(again, 4), steps(f16, 4))


def test_save_state_to_a_file_is_all_or_nothing(tmp_path, monkeypatch):
    """A write that fails midway (a full disk) used to leave the previous good file truncated;
    now the previous file stays whole and no temporary file is left behind."""
    m = model(LLAMA_Q8)
    m.reset()
    m.eval([1, 2, 3])
    path = tmp_path / "state.bin"
    m.save_state(path)
    good = path.read_bytes()
    m.eval([4, 5])

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        m.save_state(path)
    monkeypatch.undo()
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.bin"]
    m.save_state(path)
    assert path.read_bytes() != good
