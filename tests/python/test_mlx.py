"""MLX affine-quantized weights (4 and 8 bits, groups of 32, 64 and 128): the GEMV, GEMM and
embedding kernels against a NumPy dequantization, and a whole MLX checkpoint against
transformers running the same dequantized weights, on both backends."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import akunu
from akunu import ops
from support.fixture_paths import require
from support.mlx_quant import dequantize, device_bytes, quantize
from support.safetensors_writer import write_model_dir

TYPES = [(bits, group) for bits in (4, 8) for group in (32, 64, 128)]


@pytest.fixture(scope="module")
def device(backend):
    """Each backend in turn (conftest.py `backend`): the CPU kernels hold to the same references."""
    return akunu.Device(backend)


def mlx_weights(device, rng, rows, k, bits, group):
    codes, scales, biases = quantize(rng.standard_normal((rows, k)).astype(np.float32), bits, group)
    return device.upload(device_bytes(codes, scales, biases)), dequantize(codes, scales, biases, bits)


@pytest.mark.parametrize("bits, group", TYPES)
@pytest.mark.parametrize("rows, groups", [(1, 1), (7, 3), (33, 5), (130, 2)])
def test_gemv_gemm_embed(device, rng, bits, group, rows, groups):
    """Odd row counts leave partial workgroups and GEMM tiles; rows of 1 to 5 groups give a
    workgroup's invocations less than a row or several passes over it."""
    wtype = f"MLX{bits}_G{group}"
    k = groups * group
    w_dev, w = mlx_weights(device, rng, rows, k, bits, group)
    x = rng.standard_normal((5, k)).astype(np.float32)
    atol = 1e-4 * np.abs(w).max() * np.sqrt(k)

    y = device.upload(np.full(rows, np.nan, np.float32))
    ops.gemv(w_dev, device.upload(x[0]), y, wtype=wtype)
    np.testing.assert_allclose(y.numpy(), w @ x[0].astype(np.float64), rtol=1e-4, atol=atol)

    ym = device.upload(np.full((5, rows), np.nan, np.float32))
    ops.gemm(w_dev, device.upload(x), ym, wtype=wtype, coopmat=False)
    np.testing.assert_allclose(ym.numpy(), x.astype(np.float64) @ w.T, rtol=1e-4, atol=atol)

    ids = np.array([rows - 1, 0, rows // 2, 0], np.uint32)
    out = device.upload(np.full((len(ids), k), np.nan, np.float32))
    ops.embed(w_dev, device.upload(ids), out, wtype=wtype, scale=0.5)
    np.testing.assert_allclose(out.numpy(), 0.5 * w[ids], rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gemm_cooperative_matrix(device, rng):
    if not device.profile["gemm_coopmat"]:
        pytest.skip("the device has no cooperative matrices (lavapipe runs only the scalar GEMM)")
    w_dev, w = mlx_weights(device, rng, 67, 192, 4, 64)
    x = rng.standard_normal((37, 192)).astype(np.float32)
    y = device.upload(np.full((37, 67), np.nan, np.float32))
    ops.gemm(w_dev, device.upload(x), y, wtype="MLX4_G64", coopmat=True)
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) @ w.T, rtol=2e-3, atol=2e-3 * np.abs(w).max() * 56)


def mlx_checkpoint(tmp_path, bits, group):
    """The tiny llama3 fixture with every matrix (embedding and LM head too) MLX-quantized, and a
    float32 HF copy holding exactly the dequantized weights, for transformers."""
    load_file = pytest.importorskip("safetensors.numpy", reason="reads the fixture's weights").load_file
    hf = require("tiny-llama3-random", "hf")
    tensors = load_file(str(hf / "model.safetensors"))
    config = json.loads((hf / "config.json").read_text())
    mlx, plain = {}, {}
    for name, w in tensors.items():
        w = w.astype(np.float32)
        if w.ndim == 2:
            codes, scales, biases = quantize(w, bits, group)
            stem = name[: -len(".weight")]
            mlx |= {name: codes, stem + ".scales": scales, stem + ".biases": biases}
            plain[name] = dequantize(codes, scales, biases, bits).astype(np.float32)
        else:
            mlx[name] = plain[name] = w
    dirs = {}
    for kind, t, cfg in (("mlx", mlx, config | {"quantization": {"group_size": group, "bits": bits}}),
                         ("plain", plain, config | {"torch_dtype": "float32"})):
        dirs[kind] = tmp_path / kind
        write_model_dir(dirs[kind], t, cfg)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            if (hf / f).exists():
                shutil.copy(hf / f, dirs[kind] / f)
    return dirs


@pytest.mark.parametrize("bits, group", [(4, 64), (8, 32)])
def test_mlx_checkpoint_matches_transformers(tmp_path, backend, bits, group):
    torch = pytest.importorskip("torch", reason="transformers' forward pass is the reference")
    transformers = pytest.importorskip("transformers")
    dirs = mlx_checkpoint(tmp_path, bits, group)
    ids = [2040, 5, 17, 300, 1999, 42, 7, 7, 1000, 3, 64, 128, 900]
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(dirs["plain"]), torch_dtype=torch.float64)
    with torch.no_grad():
        want = ref(torch.tensor([ids])).logits[0].numpy()
    m = akunu.Model(str(dirs["mlx"]), context=64, progress=False)
    planned, allocated = m.memory_report()["weights"]
    assert planned == allocated  # the plan counts the (scale, bias) pairs akunu adds
    got = m.eval(ids, all_logits=True)
    np.testing.assert_allclose(got, want, atol=0.05)  # the fixture README's fp16 bound: f16 KV cache, f16 GEMM inputs
    m.reset()
    stepped = np.stack([m.eval([i], reset=False).copy() for i in ids])
    np.testing.assert_allclose(stepped, want, atol=0.05)


def test_unsupported_mlx_bits_name_themselves(tmp_path):
    """MLX also writes 2-, 3- and 6-bit checkpoints, which akunu reads but has no kernels for."""
    dirs = mlx_checkpoint(tmp_path, 2, 32)
    with pytest.raises(akunu.Error,
                       match="2 bits in groups of 32 is not supported.*4 or 8 bits in groups of 32, 64 or 128"):
        akunu.Model(str(dirs["mlx"]), context=32, progress=False)
