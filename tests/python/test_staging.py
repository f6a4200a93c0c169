"""Reads and writes of unmapped device memory of any size go through the device's one staging
area in pieces: all-position logits, hidden-state taps, Whisper's encoder output, logits and
cross-attention read back (and the mel written) bit for bit as from mapped memory, and no
repeated call allocates device memory. Tuning mapped_memory=0 leaves lavapipe's memory unmapped,
as a discrete GPU's is without resizable BAR, and staging_kib sets the pieces' size: sizes of one
piece, of exactly k pieces and of k pieces and a remainder. The CPU backend stages nothing (its
buffers are host memory): there the same calls must allocate nothing and agree too."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import require

pytestmark = pytest.mark.usefixtures("backend")

LLAMA = ("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf")  # vocab 2048, dim 256
AREA_KIB = 20  # 2.5 logits rows of 8 KiB, 20 tap rows of 1 KiB


def staged(kib: int) -> str:
    return f"mapped_memory=0,staging_kib={kib}"


def check_area(device, kib: int, backend: str):
    """The staged path is the one taken: unmapped memory, an area of exactly `kib` KiB."""
    if backend == "cpu":
        assert device.staging_bytes == 0
        return
    assert device.staging_bytes == kib * 1024
    assert not device.allocate(64).host_visible


def test_eval_reads_logits_and_taps_of_any_size_in_pieces(backend):
    plain = akunu.Model(require(*LLAMA), context=64, progress=False)
    m = akunu.Model(require(*LLAMA), context=64, progress=False, tuning=staged(AREA_KIB))
    check_area(m.device, AREA_KIB, backend)
    rng = np.random.default_rng(5)
    # Tokens: logits pieces of 20 KiB (2 tokens: 1 piece, 5: 2 pieces, 7: 2 and a remainder, 47:
    # 18 and a remainder) and tap pieces (20: exactly 1 piece, 40: 2, 47: 2 and a remainder).
    sizes = [2, 5, 7, 20, 40, 47]
    prompts = {n: rng.integers(0, m.config.vocab_size, n).tolist() for n in sizes}
    m.eval(prompts[47], all_logits=True, hidden_states=[0, -1])  # builds the tapped table once
    before = m.memory_report()["device_allocations"]
    for _ in range(2):
        for n, ids in prompts.items():
            logits, taps = m.eval(ids, all_logits=True, hidden_states=[0, -1])
            want_logits, want_taps = plain.eval(ids, all_logits=True, hidden_states=[0, -1])
            assert logits.shape == (n, m.config.vocab_size)
            np.testing.assert_array_equal(logits, want_logits, err_msg=f"{n} tokens")
            for layer in (0, -1):
                assert taps[layer].shape == (n, m.config.dim)
                np.testing.assert_array_equal(taps[layer], want_taps[layer], err_msg=f"{n} tokens, layer {layer}")
            np.testing.assert_array_equal(m.eval(ids, all_logits=True), want_logits)
    assert m.memory_report()["device_allocations"] == before, "a staged read allocated device memory"
    check_area(m.device, AREA_KIB, backend)


# Whisper (tiny-whisper-random, one slot: its logits row of 207456 bytes fits the area): the
# encoder output of one window is 384000 bytes, 375 KiB; a decoder row's cross-attention
# 4 heads x 1500 keys of 4 bytes, 24000 bytes.
@pytest.mark.parametrize("kib, rows", [(375, 32), (250, 33)], ids=["exact", "remainder"])
def test_whisper_reads_of_any_size_in_pieces(backend, kib, rows):
    """At 375 KiB the encoder output is exactly 1 piece and 32 rows' cross-attention exactly 2;
    at 250 KiB the encoder output is 1 piece and a remainder, and so are 33 rows' (3 and a
    remainder); the mel written (960000 bytes) and the logits read are several pieces and a
    remainder at both."""
    path = str(require("whisper") / "tiny-whisper-random" / "hf")
    mel = np.load(require("whisper") / "tiny-en" / "jfk_mel.npy")
    plain = _akunu.WhisperModel.load(path, max_sequences=1)
    w = _akunu.WhisperModel.load(path, tuning=staged(kib), max_sequences=1)
    check_area(w.device, kib, backend)
    ids = [50257 + (i % 3) if i < 3 else 220 + 7 * i for i in range(rows)]

    def run(model):
        out = model.encode(mel)
        model.set_audio(0, 0)
        model.reset(0)
        logits = model.decode([0], [ids], all_logits=True)
        return out, logits, model.cross_attention(1)

    want = run(plain)
    run(w)
    before = w.device_allocations
    for _ in range(2):
        for got, expected, what in zip(run(w), want, ("encoder output", "logits", "cross-attention")):
            np.testing.assert_array_equal(got, expected, err_msg=what)
    assert w.device_allocations == before, "a staged transfer allocated device memory"
    check_area(w.device, kib, backend)
