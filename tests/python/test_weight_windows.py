"""Weight matrices bound in row windows (engine/weight_windows.h), for devices that bind less
at once than a matrix holds (maxStorageBufferRange: 128 MiB on lavapipe): the embedding and
the LM head run once per window, and the logits equal those of the whole bindings."""
from __future__ import annotations

import numpy as np
import pytest

import akunu
from support.fixture_paths import random_gguf

pytestmark = pytest.mark.usefixtures("backend")


def windows(m: akunu.Model, label: str, prefill: bool = False) -> list[dict]:
    return [c for c in m.dispatch_table(prefill) if c["label"] == label]


def bound_bytes(command: dict, binding: int) -> int:
    size, offset, range_ = command["bindings"][binding]
    return range_ or size - offset


# The tiny model (dim 256, vocab 1024, ffn 768). A binding limit between its largest
# projection (ffn, 384 KiB of f16, 204 KiB of q8_0) and its embedding and head (512 KiB of
# f16; 272 KiB of q8_0, on Vulkan devices the head in tiles of the same size) splits only
# those two, in two windows each, and leaves the logits bit for bit as they were. 160 KiB
# splits the f16 FFN matrices too (3 windows each, the embedding 4): their GEMVs then run on
# their own (no gate/up fusion, no norm handed forward), which rounds differently.
@pytest.mark.parametrize("wtype, kib, n_embed", [("f16", 448, 2), ("q8_0", 240, 2), ("f16", 160, 4)])
def test_row_windows_give_the_logits_of_whole_bindings(tmp_path_factory, wtype, kib, n_embed):
    path = random_gguf(tmp_path_factory, wtype)
    whole = akunu.Model(path, context=64, progress=False)
    split = akunu.Model(path, context=64, progress=False, tuning={"weight_binding_kib": kib})
    for prefill in (False, True):
        assert len(windows(whole, "token_embd", prefill)) == 1
        embeds = windows(split, "token_embd", prefill)
        assert len(embeds) == n_embed and all(bound_bytes(e, 0) <= kib * 1024 for e in embeds)
        assert len(windows(split, "output", prefill)) > len(windows(whole, "output", prefill))
        weights = [c["bindings"][0] for c in split.dispatch_table(prefill) if c["kernel"].startswith(("gemv", "gemm"))]
        assert all((r or size - off) <= kib * 1024 for size, off, r in weights)
    ids = [1, 1023, 17, 300, 5, 999, 512, 511, 42]  # tokens of every window, the last row included
    same = np.testing.assert_array_equal if kib > 384 else (
        lambda got, want: np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max()))
    same(split.eval(ids, all_logits=True), whole.eval(ids, all_logits=True))
    whole.reset()
    split.reset()
    for i in ids:  # decode steps: one GEMV per window of the head
        want = whole.eval([i], reset=False).copy()
        same(split.eval([i], reset=False), want)


def test_windows_too_small_for_one_row_are_refused(tmp_path_factory):
    path = random_gguf(tmp_path_factory, "f16")
    with pytest.raises(akunu.Error, match=r"token_embd: .* rows of 256 F16 weights take .* bytes, more than one "
                                          r"binding of 1024 bytes"):
        akunu.Model(path, context=64, progress=False, tuning={"weight_binding_kib": 1})


@pytest.mark.slow
def test_an_embedding_past_the_device_binding_limit_runs(tmp_path_factory, backend):
    """A vocabulary of 140,000 f32 rows of 256 (137 MiB, the head tied to it) on a device
    that binds at most 128 MiB at once (lavapipe): the last logits against the float64
    NumPy forward pass, for tokens at both ends of the table."""
    limit = akunu.Device(backend).profile["max_storage_buffer_range"]
    vocab = 140_000
    if limit >= vocab * 256 * 4:
        pytest.skip(f"the {backend} device binds {limit >> 20} MiB at once: the table fits one binding")
    pytest.importorskip("gguf", reason="gguf-py writes the model and reads it for the reference")
    from support.ggml_blocks import with_vocab
    from support.numpy_llama import NumpyLlama

    src = random_gguf(tmp_path_factory, "f16")
    path = with_vocab(src, src.with_name("tiny-140k.gguf"), vocab)
    m = akunu.Model(path, context=64, progress=False)
    assert len(windows(m, "token_embd")) == 2
    ids = [1, vocab - 1, 70_000, 5, 139_000]
    want = NumpyLlama(str(path)).logits(ids)[-1]
    got = m.eval(ids).copy()
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max() + 1e-3
    assert got.argmax() == want.argmax()
