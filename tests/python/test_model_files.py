"""Model files: GGUF and safetensors readers against the fixtures (converted by llama.cpp's own
converter from the HF originals) and against gguf-py's reference dequantizers."""
from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import FIXTURES, requires_fixtures

pytestmark = requires_fixtures
MODELS = ["tiny-llama3-random", "tiny-qwen3-random", "tiny-gemma3-random", "trained-code-llama"]


def gguf_path(model, kind):
    return FIXTURES / model / "gguf" / f"{model}-{kind}.gguf"


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def hf_tensor(model_files, name):
    t = next(t for t in model_files.tensors if t["name"] == name)
    if t["dtype"] == "BF16":
        return bf16_to_f32(model_files.tensor(name))
    return model_files.tensor(name, dequantize=True)


def unpermute_gguf_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undoes llama.cpp's Q/K row permutation for llama-arch GGUF files.

    The converter reorders each head's rows as reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2)
    so that RoPE can rotate adjacent pairs (2i, 2i+1) (GPT-J style) instead of HF's (i, i+d/2).
    """
    out, inp = w.shape
    return w.reshape(n_head, out // n_head // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("kind", ["f16", "q8_0"])
def test_fixture_gguf_opens(model, kind):
    m = akunu.open(str(gguf_path(model, kind)))
    assert m.format == "gguf" and m.gguf_version == 3
    manifest = json.loads((FIXTURES / model / "manifest.json").read_text())
    summary = manifest["gguf"][kind]["summary"]
    assert len(m.tensors) == len(summary["tensors"])
    by_name = {t["name"]: t for t in m.tensors}
    for name, dtype, ggml_shape in summary["tensors"]:
        assert by_name[name]["dtype"] == dtype
        assert by_name[name]["shape"] == tuple(reversed(ggml_shape))  # ggml ne[] is innermost first
    md = m.metadata
    for key, value in summary["metadata"].items():
        if isinstance(value, str) and value.startswith("<array len="):
            assert len(md[key]) == int(value[len("<array len="):-1])
        elif isinstance(value, float):
            assert md[key] == pytest.approx(value, rel=1e-6)
        else:
            assert md[key] == value, key


@pytest.mark.parametrize("model", MODELS)
def test_gguf_f16_matches_safetensors(model):
    """All fixture weights are exact in f16, so dequantized GGUF f16 equals HF bit for bit, once
    the converter's layout changes are undone: llama Q/K row order, and gemma's stored norm + 1."""
    g = akunu.open(str(gguf_path(model, "f16")))
    h = akunu.open(str(FIXTURES / model / "hf"))
    md = g.metadata
    arch = md["general.architecture"]
    n_head = md[f"{arch}.attention.head_count"]
    n_kv = md[f"{arch}.attention.head_count_kv"]
    pairs = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    for layer in range(md[f"{arch}.block_count"]):
        for gname, hname in [("attn_q", "self_attn.q_proj"), ("attn_k", "self_attn.k_proj"),
                             ("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"),
                             ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"),
                             ("ffn_down", "mlp.down_proj"), ("attn_norm", "input_layernorm")]:
            pairs[f"blk.{layer}.{gname}.weight"] = f"model.layers.{layer}.{hname}.weight"
    for gname, hname in pairs.items():
        got = g.tensor(gname, dequantize=True)
        want = hf_tensor(h, hname)
        if arch == "llama" and ".attn_q." in gname:
            got = unpermute_gguf_qk(got, n_head)
        if arch == "llama" and ".attn_k." in gname:
            got = unpermute_gguf_qk(got, n_kv)
        if arch == "gemma3" and "norm" in gname:
            got = got - 1.0  # the converter stores norm + 1 for gemma
        np.testing.assert_array_equal(got, want, err_msg=f"{gname} vs {hname}")


def test_llama_qk_permutation_is_needed():
    """Without undoing the permutation the llama Q rows do not match: the test above can fail."""
    g = akunu.open(str(gguf_path("tiny-llama3-random", "f16")))
    h = akunu.open(str(FIXTURES / "tiny-llama3-random" / "hf"))
    got = g.tensor("blk.0.attn_q.weight", dequantize=True)
    want = hf_tensor(h, "model.layers.0.self_attn.q_proj.weight")
    assert not np.array_equal(got, want)
    np.testing.assert_array_equal(unpermute_gguf_qk(got, 4), want)


@pytest.mark.parametrize("model", ["tiny-qwen3-random", "trained-code-llama"])
def test_gguf_q8_0_within_quantization_error(model):
    g = akunu.open(str(gguf_path(model, "q8_0")))
    h = akunu.open(str(FIXTURES / model / "hf"))
    got = g.tensor("blk.0.ffn_up.weight", dequantize=True)
    want = hf_tensor(h, "model.layers.0.mlp.up_proj.weight")
    blocks = want.reshape(-1, 32)
    step = np.abs(blocks).max(axis=1, keepdims=True) / 127  # one Q8_0 step per block
    err = np.abs(got.reshape(-1, 32) - blocks)
    # Half a step of rounding, plus the f16 rounding of the block scale over up to 127 steps.
    assert np.all(err <= step * (0.5 + 127 * 2.0**-11) + 1e-7)
    assert not np.array_equal(got, want)  # it is quantized


def test_raw_tensors_are_read_only_copies():
    g = akunu.open(str(gguf_path("tiny-qwen3-random", "f16")))
    t = g.tensor("blk.0.attn_q.weight")
    assert t.dtype == np.float16 and t.shape == (512, 256)
    assert not t.flags.writeable
    with pytest.raises(ValueError):
        t[0, 0] = 1
    q = akunu.open(str(gguf_path("tiny-qwen3-random", "q8_0"))).tensor("blk.0.attn_q.weight")
    assert q.dtype == np.uint8 and q.shape == (512, 256 // 32 * 34)
    with pytest.raises(KeyError, match="no tensor named"):
        g.tensor("nope")


def test_a_file_cut_after_open_raises_instead_of_sigbus(tmp_path):
    """The file is truncated after akunu.open(): reading a tensor used to kill the process with
    SIGBUS (a view of the lost pages); now each read raises, and copies taken before stay whole."""
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_path("tiny-qwen3-random", "f16").read_bytes())
    g = akunu.open(str(path))
    name = g.tensors[-1]["name"]
    before = g.tensor(name)
    want = before.copy()
    with open(path, "r+b") as f:
        f.truncate(4096)
    for dequantize in (False, True):
        with pytest.raises(akunu.Error, match="m.gguf' changed size after it was opened .* open it again"):
            g.tensor(name, dequantize=dequantize)
    np.testing.assert_array_equal(before, want)


def _random_blocks(rng, type_name, n_blocks):
    """Random raw blocks whose f16 scale fields hold small finite values."""
    info = next(t for t in _akunu.tensor_types() if t["name"] == type_name)
    raw = rng.integers(0, 256, (n_blocks, info["block_bytes"]), dtype=np.uint8)
    half_fields = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
                   "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}[type_name]
    for off in half_fields:
        raw[:, off:off + 2] = rng.uniform(-0.1, 0.1, n_blocks).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"])
def test_dequantize_matches_gguf_py(type_name):
    gguf = pytest.importorskip("gguf", reason="gguf-py is the reference dequantizer")
    rng = np.random.default_rng(7)
    raw = _random_blocks(rng, type_name, 37)
    got = _akunu.dequantize(raw.reshape(-1), type_name)
    want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[type_name]).reshape(-1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_plain_types_dequantize():
    x = np.arange(-5, 6, dtype=np.float32)
    np.testing.assert_array_equal(_akunu.dequantize(x.astype(np.float16).view(np.uint8), "F16"), x)
    bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(_akunu.dequantize(bf16.view(np.uint8), "BF16"), x)
    with pytest.raises(akunu.Error, match="unsupported type IQ2_XXS"):
        _akunu.dequantize(np.zeros(66, np.uint8), "IQ2_XXS")
    with pytest.raises(akunu.Error, match="whole number"):
        _akunu.dequantize(np.zeros(35, np.uint8), "Q8_0")


def test_every_ggml_type_is_in_the_table():
    ids = {t["id"] for t in _akunu.tensor_types()}
    gguf = pytest.importorskip("gguf", reason="gguf-py lists ggml's type ids")
    for t in gguf.GGMLQuantizationType:
        assert t.value in ids, t.name


def test_safetensors_single_file_and_directory():
    d = FIXTURES / "tiny-llama3-random" / "hf"
    a = akunu.open(str(d))
    b = akunu.open(str(d / "model.safetensors"))
    assert a.format == b.format == "safetensors"
    assert a.tensors == b.tensors
    assert a.metadata["model_type"] == "llama"
    w = a.tensor("model.layers.0.self_attn.q_proj.weight")
    assert w.dtype == np.float32 and w.shape == (256, 256)


def test_gguf_v2_opens(tmp_path):
    from support.gguf_bytes import tiny_llama_gguf
    v3 = tiny_llama_gguf()
    path = tmp_path / "v2.gguf"
    path.write_bytes(v3[:4] + (2).to_bytes(4, "little") + v3[8:])
    m = akunu.open(str(path))
    assert m.gguf_version == 2
    akunu.plan(m, check_device=False)


def test_sharded_safetensors_index(tmp_path):
    from support.safetensors_writer import safetensors_bytes, tiny_llama
    tensors, config = tiny_llama()
    names = sorted(tensors)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for shard, part in shards.items():
        (tmp_path / shard).write_bytes(safetensors_bytes({n: tensors[n] for n in part}))
    weight_map = {n: shard for shard, part in shards.items() for n in part}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps(config))
    m = akunu.open(str(tmp_path))
    assert {t["name"] for t in m.tensors} == set(names)
    assert {pathlib.Path(t["file"]).name for t in m.tensors} == set(shards)
    np.testing.assert_array_equal(m.tensor(names[-1]), tensors[names[-1]])
    akunu.plan(m, check_device=False)


def test_mlx_affine_quantized_directory(tmp_path):
    from support.safetensors_writer import tiny_llama, write_model_dir
    tensors, config = tiny_llama()
    bits, group = 4, 32
    config["quantization"] = {"group_size": group, "bits": bits}
    mlx = {}
    for name, w in tensors.items():
        if w.ndim == 2:  # MLX quantizes every linear layer and the embedding
            out, inp = w.shape
            base = name[: -len(".weight")]
            mlx[name] = np.zeros((out, inp * bits // 32), np.uint32)
            mlx[base + ".scales"] = np.ones((out, inp // group), np.float16)
            mlx[base + ".biases"] = np.zeros((out, inp // group), np.float16)
        else:
            mlx[name] = w
    write_model_dir(tmp_path / "ok", mlx, config)
    m = akunu.open(str(tmp_path / "ok"))
    assert m.format == "mlx"
    p = akunu.plan(m, check_device=False)
    # Uploaded as the codes plus an f32 (scale, bias) pair per group (mlx_weights.h).
    want = sum(w.size * bits // 8 + w.size // group * 8 for w in tensors.values() if w.ndim == 2)
    assert dict(p.weights_by_dtype)["MLX4_G32"] == want
    del mlx["model.layers.0.mlp.up_proj.scales"]
    mlx["model.layers.1.mlp.down_proj.weight"] = np.zeros((64, 96), np.uint32)  # not packed
    write_model_dir(tmp_path / "bad", mlx, config)
    with pytest.raises(akunu.Error) as e:
        akunu.plan(str(tmp_path / "bad"), check_device=False)
    assert "model.layers.0.mlp.up_proj.scales is missing" in str(e.value)
    assert "model.layers.1.mlp.down_proj.weight: expected packed U32 [64, 12], found [64, 96]" in str(e.value)


@pytest.mark.parametrize("declared", [16, 64])
def test_an_alignment_that_disagrees_with_the_padding_is_detected(tmp_path, declared):
    """Files padded to 32 bytes that declare general.alignment 16 or 64: used to load and read
    every tensor from shifted bytes (NaN logits). Now each either reads the same tensors as the
    file declaring 32, or is refused naming general.alignment; some are refused."""
    from support.gguf_bytes import STR, U32, kv, tiny_llama_gguf
    refused = 0
    for filler in range(32):
        extra = [kv("general.name", STR, "x" * filler)]
        good, bad = tmp_path / f"good{filler}.gguf", tmp_path / f"bad{filler}.gguf"
        good.write_bytes(tiny_llama_gguf(extra=extra))
        bad.write_bytes(tiny_llama_gguf(extra=[*extra, kv("general.alignment", U32, declared)]))
        want = akunu.open(str(good)).tensor("token_embd.weight")
        try:
            got = akunu.open(str(bad)).tensor("token_embd.weight")
        except akunu.Error as e:
            assert re.search(f"does general.alignment {declared} match the file's padding|not a multiple of the "
                             f"alignment {declared}|extends past the end of the file", str(e)), str(e)
            refused += 1
            continue
        np.testing.assert_array_equal(got, want)
    assert refused > 0


def test_metadata_values_are_capped(tmp_path):
    """A 5 MB u8 array used to cost 50 times its size in memory: the metadata's value count is
    capped, and the cap is stated."""
    import struct

    from support.gguf_bytes import ARR, U8, gstr, tiny_llama_gguf
    big = gstr("general.blob") + struct.pack("<IIQ", ARR, U8, 5 << 20) + bytes(5 << 20)
    path = tmp_path / "m.gguf"
    path.write_bytes(tiny_llama_gguf(extra=[big]))
    with pytest.raises(akunu.Error, match=r"general.blob: the metadata holds more than 4194304 values"):
        akunu.open(str(path))
    small = gstr("general.blob") + struct.pack("<IIQ", ARR, U8, 1000) + bytes(1000)
    path.write_bytes(tiny_llama_gguf(extra=[small]))
    assert akunu.open(str(path)).metadata["general.blob"] == [0] * 1000
