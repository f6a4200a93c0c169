"""ModelConfig, the architecture table, RoPE tables, validation and the memory plan."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import FIXTURES, requires_fixtures
from support.safetensors_writer import tiny_llama, write_model_dir

pytestmark = requires_fixtures
MODELS = ["tiny-llama3-random", "tiny-qwen3-random", "tiny-gemma3-random", "trained-code-llama"]


def sources(model):
    return [FIXTURES / model / "hf", FIXTURES / model / "gguf" / f"{model}-f16.gguf",
            FIXTURES / model / "gguf" / f"{model}-q8_0.gguf"]


@pytest.mark.parametrize("model", MODELS)
def test_fixture_configs_match_config_json(model):
    hf = json.loads((FIXTURES / model / "hf" / "config.json").read_text())
    for src in sources(model):
        c = akunu.load_config(src).as_dict()
        assert c["n_layers"] == hf["num_hidden_layers"]
        assert c["dim"] == hf["hidden_size"]
        assert c["n_heads"] == hf["num_attention_heads"]
        assert c["n_kv_heads"] == hf["num_key_value_heads"]
        assert c["head_dim"] == hf["head_dim"]
        assert c["ffn_dim"] == hf["intermediate_size"]
        assert c["vocab_size"] == hf["vocab_size"]
        assert c["tied_embeddings"] == hf["tie_word_embeddings"]
        assert c["norm_eps"] == pytest.approx(hf["rms_norm_eps"], rel=1e-6)
        assert c["q_dim"] == hf["num_attention_heads"] * hf["head_dim"]
        assert c["attn_scale"] == pytest.approx(1 / math.sqrt(hf.get("query_pre_attn_scalar", hf["head_dim"])))


@pytest.mark.parametrize("model", MODELS)
def test_every_fixture_opens_validates_and_plans(model):
    for src in sources(model):
        p = akunu.plan(src, context=512, prefill_chunk=128)
        assert p.fits, str(p)
        assert p.weights_bytes > 0 and not p.weights_estimated
        assert p.kv_bytes == 2 * p.config.n_layers * p.config.n_kv_heads * 512 * p.config.head_dim * 2
        assert "memory plan" in str(p)


def test_gemma3_sliding_pattern_and_local_rope():
    for src in sources("tiny-gemma3-random"):
        c = akunu.load_config(src)
        d = c.as_dict()
        assert d["layer_sliding"] == [True] * 5 + [False]
        assert d["sliding_window"] == 32
        assert d["embed_scale"] == pytest.approx(16.0)
        rope = json.loads((FIXTURES / "tiny-gemma3-random" / "manifest.json").read_text())["rope"]
        glob = _akunu.rope_inv_freq(c, sliding=False)
        local = _akunu.rope_inv_freq(c, sliding=True)
        full, sliding = (rope[f"model.rotary_emb.{kind}_attention_inv_freq"] for kind in ("full", "sliding"))
        np.testing.assert_allclose(glob[:4], full["inv_freq_first4"], rtol=1e-6)
        np.testing.assert_allclose(glob[-4:], full["inv_freq_last4"], rtol=1e-6)
        np.testing.assert_allclose(local[-4:], sliding["inv_freq_last4"], rtol=1e-6)


def test_llama3_rope_matches_transformers_and_the_gguf_divisors():
    manifest = json.loads((FIXTURES / "tiny-llama3-random" / "manifest.json").read_text())
    want = np.array(manifest["llama3_rope_check"]["expected_inv_freq"])
    hf = akunu.load_config(FIXTURES / "tiny-llama3-random" / "hf")
    assert hf.as_dict()["rope_scaling"] == "llama3"
    np.testing.assert_allclose(_akunu.rope_inv_freq(hf), want, rtol=1e-6)
    g = akunu.open(str(FIXTURES / "tiny-llama3-random" / "gguf" / "tiny-llama3-random-f16.gguf"))
    gc = akunu.load_config(g)
    assert gc.as_dict()["rope_freqs_tensor"]
    divisors = g.tensor("rope_freqs.weight", dequantize=True)
    np.testing.assert_allclose(_akunu.rope_inv_freq(gc, divisors=divisors), want, rtol=1e-6)


def _config(**over):
    base = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 100, "rope_theta": 500000.0}
    return akunu.load_config(base | over)


def test_rope_closed_forms():
    d = 64
    i = np.arange(d // 2)
    base = 500000.0 ** (-2 * i / d)
    np.testing.assert_allclose(_akunu.rope_inv_freq(_config()), base, rtol=1e-6)
    lin = _config(rope_scaling={"type": "linear", "factor": 4.0})
    np.testing.assert_allclose(_akunu.rope_inv_freq(lin), base / 4, rtol=1e-6)
    l3 = _config(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192})
    got = _akunu.rope_inv_freq(l3)
    wavelen = 2 * np.pi / base
    high = wavelen < 8192 / 4  # short wavelengths: unchanged
    low = wavelen > 8192 / 1   # long wavelengths: divided by the factor
    np.testing.assert_allclose(got[high], base[high], rtol=1e-6)
    np.testing.assert_allclose(got[low], base[low] / 8, rtol=1e-6)
    mid = ~high & ~low
    smooth = (8192 / wavelen[mid] - 1) / (4 - 1)
    np.testing.assert_allclose(got[mid], (1 - smooth) * base[mid] / 8 + smooth * base[mid], rtol=1e-6)
    assert high.any() and low.any() and mid.any()


def test_arch_table_and_aliases():
    names = {a["name"] for a in akunu.arch_table()}
    assert {"llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "bert"} <= names
    assert _config(model_type="mistral").architecture == "llama"
    gemma2 = _config(model_type="gemma2", sliding_window=16, head_dim=64)
    d = gemma2.as_dict()
    assert d["layer_sliding"] == [True, False]
    assert d["attn_softcap"] == 50 and d["final_softcap"] == 30
    # A cap given as null is off (transformers skips it); one given is used.
    off = _config(model_type="gemma2", head_dim=64, attn_logit_softcapping=None, final_logit_softcapping=None).as_dict()
    assert off["attn_softcap"] == 0 and off["final_softcap"] == 0
    given = _config(model_type="gemma2", head_dim=64, attn_logit_softcapping=7.5,
                    final_logit_softcapping=12.0).as_dict()
    assert given["attn_softcap"] == 7.5 and given["final_softcap"] == 12.0
    scaled = _config(model_type="gemma2", head_dim=64, query_pre_attn_scalar=144).as_dict()
    assert scaled["attn_scale"] == pytest.approx(1 / 12)
    with pytest.raises(akunu.Error, match="unknown architecture 'gpt-neox'.*llama.*gemma3"):
        _config(model_type="gpt-neox")
    qwen2 = _config(model_type="qwen2", sliding_window=4096, use_sliding_window=False)
    assert qwen2.as_dict()["sliding_window"] == 0 and qwen2.as_dict()["qkv_bias"]
    # With the window on and no layer_types, layers from max_window_layers on slide (transformers' rule).
    qwen2 = _config(model_type="qwen2", sliding_window=16, use_sliding_window=True, max_window_layers=1).as_dict()
    assert qwen2["sliding_window"] == 16 and qwen2["layer_sliding"] == [False, True]
    with pytest.raises(akunu.Error,
                       match=r"layer type 'chunked_attention' is not supported \(full_attention, sliding_attention\)"):
        _config(layer_types=["full_attention", "chunked_attention"])
    # Qwen2.5's long-context YaRN scaling is not implemented: named, with what is.
    with pytest.raises(akunu.Error, match=r"rope type 'yarn' is not supported \(default, linear, llama3\)"):
        _config(model_type="qwen2",
                rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})


def test_config_errors_name_the_key():
    with pytest.raises(akunu.Error, match='"hidden_size" must be an integer'):
        _config(hidden_size="big")
    with pytest.raises(akunu.Error, match="n_heads 4 is not a multiple of n_kv_heads 3"):
        _config(num_key_value_heads=3)
    with pytest.raises(akunu.Error, match='required key "intermediate_size"'):
        akunu.load_config({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1,
                           "num_attention_heads": 2, "vocab_size": 10})


@pytest.mark.parametrize("key, value, message", [
    ("rope.freq_base_swa", float("nan"), "rope theta of sliding layers .* = nan is not a finite number"),
    ("rope.freq_base", float("inf"), "rope theta = inf is not a finite number"),
    ("rope.scaling.factor", float("inf"), "rope scaling factor = inf is not a finite number"),
    ("attention.layer_norm_rms_epsilon", float("nan"), "norm epsilon = nan is not a finite number"),
    ("attn_logit_softcapping", float("nan"), "attention soft-capping = nan is not a finite number"),
])
def test_every_config_float_is_checked_the_same_way(tmp_path, key, value, message):
    """A NaN gemma3.rope.freq_base_swa used to load (every logit NaN) while a NaN rope_theta was
    refused; an infinite base or factor loaded too."""
    from support.gguf_bytes import F32, STR, kv, tiny_llama_gguf
    extra = [kv(f"llama.{key}", F32, value)]
    if key == "rope.scaling.factor":
        extra.append(kv("llama.rope.scaling.type", STR, "linear"))
    path = tmp_path / "m.gguf"
    path.write_bytes(tiny_llama_gguf(extra=extra))
    with pytest.raises(akunu.Error, match=message):
        akunu.load_config(akunu.open(str(path)))


def test_validation_reports_missing_and_misshapen_tensors(tmp_path):
    tensors, config = tiny_llama()
    write_model_dir(tmp_path / "ok", tensors, config)
    akunu.plan(tmp_path / "ok")  # valid
    bad = dict(tensors)
    bad["model.layers.1.self_attn.k_proj.weight"] = np.zeros((64, 32), np.float32)  # transposed
    del bad["model.layers.0.mlp.up_proj.weight"]
    write_model_dir(tmp_path / "bad", bad, config)
    with pytest.raises(akunu.Error) as e:
        akunu.plan(tmp_path / "bad")
    msg = str(e.value)
    assert "model.layers.1.self_attn.k_proj.weight: expected [32, 64] F32, found [64, 32]" in msg
    assert "model.layers.0.mlp.up_proj.weight is missing" in msg
    assert "2 problems" in msg


def test_tied_embeddings_inferred_from_missing_lm_head(tmp_path):
    tensors, config = tiny_llama()
    del tensors["lm_head.weight"]
    write_model_dir(tmp_path / "m", tensors, config)
    assert akunu.load_config(tmp_path / "m").tied_embeddings
    akunu.plan(tmp_path / "m")


LLAMA31_8B = {
    "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}


def test_plan_reproduces_the_seed_figures_for_llama31_8b():
    p = akunu.plan(LLAMA31_8B, context=4096, prefill_chunk=4096, weights_dtype="Q4_0", check_device=False)
    assert p.kv_bytes == 512 * 2**20  # 32 layers x K,V x 8 heads x 4096 x 128 x f16
    # The seed lists eleven f16 prefill buffers that sum to 570,425,344 bytes (it prints
    # "~534 MB"; 544 MiB). akunu keeps the same activations in f32 and needs no post_norm
    # buffer (4096 x 4096 x 2 bytes in the seed's set), then adds the chunk's token ids, its
    # step state, 64 rows of all-position logits and the workgroup counts of two chunk tables
    # (12 bytes for each of up to 48 dispatches a layer and 8 more).
    sizes = dict(p.prefill_scratch)
    extra = ("batch_logits", "batch_token_ids", "batch_step", "batch_dispatch")
    activations = sum(b for n, b in sizes.items() if n not in extra)
    assert activations == 2 * (570_425_344 - 4096 * 4096 * 2)
    assert sizes["batch_logits"] == 64 * 128256 * 4 and sizes["batch_token_ids"] == 4096 * 4
    assert sizes["batch_dispatch"] == 2 * (64 * 32 + 8) * 12
    assert p.prefill_scratch_bytes == activations + 64 * 128256 * 4 + 4096 * 4 + 16 + sizes["batch_dispatch"]
    names = [n for n, _ in p.prefill_scratch]
    assert names[:3] == ["batch_h0", "batch_h1", "batch_residual"] and "batch_ffn_gate" in names
    assert 4.0e9 < p.weights_bytes < 4.7e9  # seed: ~4.3 GB in Q4_0
    assert p.decode_scratch_bytes < 8 * 2**20  # [dim]-sized vectors, attention scores, RoPE tables


def test_plan_says_when_it_does_not_fit():
    p = akunu.plan(LLAMA31_8B, context=131072, kv_dtype="f16")
    if p.device_bytes >= p.total_bytes:
        pytest.skip(f"{p.device} holds {p.device_bytes} bytes: this plan fits there")
    assert p.fits is False
    assert any("largest device heap" in n for n in p.notes)
    assert "DOES NOT FIT" in str(p)


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_plan_fits_against_available_memory_not_total_ram(backend):
    """Plans compared against total memory: a context that fits in RAM (the CPU backend) or the
    device heap (Vulkan) but not in what is available now 'fitted'. Now the device profile's
    available_bytes (MemAvailable; VK_EXT_memory_budget's budget minus usage) is what a plan
    must fit, and the plan says how much is available."""
    device = next((d for d in akunu.devices() if d["backend"] == backend), None)
    if device is None:
        pytest.skip(f"no {backend} device here")
    total, available = device["device_local_bytes"], device["available_bytes"]
    if backend == "cpu":
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
        assert total == info["MemTotal"] and abs(available - info["MemAvailable"]) < 0.2 * total
    if available == 0:
        pytest.skip(f"{device['name']} does not report VK_EXT_memory_budget (lavapipe before Mesa 23 does not)")
    assert 0 < available <= total
    if total - available < 256 << 20:
        pytest.skip(f"less than 256 MiB of {device['name']}'s memory is in use: no room between available and total")
    small, large = (akunu.plan(LLAMA31_8B, context=n, device=device["index"]).total_bytes for n in (1024, 2048))
    per_token = (large - small) / 1024
    context = int(1024 + ((total + available) / 2 - small) / per_token)
    if context < 1024:
        pytest.skip("the 8B plan's weights alone need more than this device's memory")
    p = akunu.plan(LLAMA31_8B, context=context, device=device["index"])
    assert available < p.total_bytes < total
    assert p.fits is False and any("are available now" in n for n in p.notes), p.notes


@pytest.mark.parametrize("kv, row", [("f16", 256), ("q8", 130), ("int4", 66), ("fp4", 66), ("q8/int4", 98),
                                           ("int4h", 66), ("fp4h", 66)])
def test_plan_kv_dtypes(kv, row):
    p = akunu.plan(LLAMA31_8B, context=1000, kv_dtype=kv, check_device=False)
    assert p.kv_bytes == 32 * 2 * 8 * 1000 * row
    with pytest.raises(akunu.Error, match="unknown kv_dtype"):
        akunu.plan(LLAMA31_8B, kv_dtype="int3", check_device=False)


def test_plan_accepts_config_json_and_modelconfig(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA31_8B))
    a = akunu.plan(tmp_path / "config.json", context=4096, check_device=False)
    b = akunu.plan(akunu.load_config(LLAMA31_8B), context=4096, check_device=False)
    assert a.weights_estimated and a.total_bytes == b.total_bytes
    assert a.kv_bytes == 512 * 2**20
