"""akunu.flops, the arithmetic the benchmarks report as TFLOP/s: the weights a token multiplies,
counted from the file by the gguf package (every 2-D tensor but the token embedding, the
embedding again where the head is tied to it), attention summed position by position, and the
tensor peaks by device name."""
from __future__ import annotations

import gguf
import pytest

import akunu
from akunu import flops
from support.fixture_paths import require


def gguf_matrix_weights(path) -> int:
    reader = gguf.GGUFReader(path)
    names = {t.name for t in reader.tensors}
    total = sum(int(t.n_elements) for t in reader.tensors if len(t.shape) == 2 and t.name != "token_embd.weight")
    if "output.weight" not in names:  # tied: the head is the embedding
        embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
        total += int(embd.n_elements)
    return total


FILES = [("tiny-llama3-random", "tiny-llama3-random-q8_0.gguf"), ("tiny-gemma3-random", None),
         ("trained-code-llama", "trained-code-llama-q8_0.gguf")]


@pytest.mark.parametrize("fixture,file", FILES)
def test_the_matrix_weights_are_the_files_matrices(fixture, file):
    folder = require(fixture, "gguf")
    path = folder / file if file else sorted(folder.glob("*.gguf"))[0]
    assert flops.matrix_weights(path) == gguf_matrix_weights(str(path))


def test_attention_adds_every_position_attended():
    path = require("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf")
    c = akunu.load_config(path)
    w = flops.matrix_weights(path)
    for start, n in [(0, 1), (0, 7), (5, 3), (100, 1)]:
        by_position = sum(2 * w + 4 * c.q_dim * c.n_layers * (t + 1) for t in range(start, start + n))
        assert flops.token_flops(w, c, n, start) == pytest.approx(by_position, rel=1e-12)


def test_the_tensor_peak_comes_from_the_data_sheet_or_the_caller():
    assert flops.tensor_peak("NVIDIA H200") == flops.tensor_peak("NVIDIA H100 80GB HBM3") == 989.4
    assert flops.tensor_peak("NVIDIA H100 PCIe") == 756.0  # not the SXM part's
    assert flops.tensor_peak("llvmpipe (LLVM 15.0.6, 256 bits)") is None
    assert flops.tensor_peak("llvmpipe", 123.0) == 123.0
    for bad in (0, -5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--peak-tflops must be a positive number"):
            flops.tensor_peak("NVIDIA H200", bad)
    assert flops.share(186.4, 989.4) == "186 (19%)" and flops.share(3.24, None) == "3.2"
    assert flops.share(0.00412, 1000.0) == "0.0041 (0%)"
