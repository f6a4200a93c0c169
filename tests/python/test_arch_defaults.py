"""What akunu reads for a key a model file leaves out, per architecture.

Each row writes a file that lacks one key and checks the value akunu's config takes. GGUF
follows llama.cpp's loader (src/llama-model.cpp, load_hparams) where it has a default, and
transformers' config class where llama.cpp requires the key; config.json follows transformers.
The config.json rows are also checked against transformers' config classes when it is installed.
"""
from __future__ import annotations

import json

import pytest

import akunu
from akunu import _akunu
from support.gguf_bytes import F32, STR, U32, gguf, kv

LLAMA_CPP = "llama.cpp load_hparams"
LLAMA_CPP_REQUIRES = "transformers (llama.cpp requires the key)"
RMS_EPS, LN_EPS = "attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"

# The keys every test file carries unless the row leaves one out.
BASE = {"block_count": 12, "embedding_length": 256, "attention.head_count": 4, "attention.head_count_kv": 2,
        "feed_forward_length": 512, "vocab_size": 100, "context_length": 1024, "rope.freq_base": 20000.0,
        "attention.key_length": 64}


def base_keys(arch: str) -> dict:
    keys = dict(BASE)
    keys[LN_EPS if arch == "bert" else RMS_EPS] = 1e-5
    if arch in ("gemma2", "gemma3"):
        keys["attention.sliding_window"] = 512
    return keys


# (architecture, GGUF key left out, config field, expected, source)
GGUF_ROWS = [
    ("gemma3", "rope.freq_base_swa", "rope_theta_local", 10000.0, "llama.cpp: LLM_ARCH_GEMMA3 swa base 10000"),
    ("gemma2", "rope.freq_base_swa", "rope_theta_local", 20000.0, "llama.cpp: swa base = rope.freq_base"),
    ("llama", "rope.freq_base_swa", "rope_theta_local", 20000.0, "llama.cpp: swa base = rope.freq_base"),
    ("llama", "rope.freq_base", "rope_theta", 10000.0, LLAMA_CPP),
    ("gemma3", "rope.freq_base", "rope_theta", 10000.0, LLAMA_CPP),
    ("qwen2", "rope.freq_base", "rope_theta", 10000.0, LLAMA_CPP),
    ("llama", RMS_EPS, "norm_eps", 1e-6, LLAMA_CPP_REQUIRES),
    ("qwen2", RMS_EPS, "norm_eps", 1e-6, LLAMA_CPP_REQUIRES),
    ("qwen3", RMS_EPS, "norm_eps", 1e-6, LLAMA_CPP_REQUIRES),
    ("gemma", RMS_EPS, "norm_eps", 1e-6, LLAMA_CPP_REQUIRES),
    ("gemma2", RMS_EPS, "norm_eps", 1e-6, LLAMA_CPP_REQUIRES),
    ("gemma3", RMS_EPS, "norm_eps", 1e-6, LLAMA_CPP_REQUIRES),
    ("bert", LN_EPS, "norm_eps", 1e-12, LLAMA_CPP_REQUIRES),
    ("llama", "context_length", "max_context", 2048, LLAMA_CPP_REQUIRES),
    ("qwen2", "context_length", "max_context", 32768, LLAMA_CPP_REQUIRES),
    ("qwen3", "context_length", "max_context", 32768, LLAMA_CPP_REQUIRES),
    ("gemma", "context_length", "max_context", 8192, LLAMA_CPP_REQUIRES),
    ("gemma2", "context_length", "max_context", 8192, LLAMA_CPP_REQUIRES),
    ("gemma3", "context_length", "max_context", 131072, LLAMA_CPP_REQUIRES),
    ("bert", "context_length", "max_context", 512, LLAMA_CPP_REQUIRES),
    ("gemma2", "attention.sliding_window", "sliding_window", 4096, "llama.cpp: gemma 2's n_swa 4096"),
    ("gemma3", "attention.sliding_window", "sliding_window", 0, "llama.cpp: no window, no SWA layers"),
    ("gemma2", "attn_logit_softcapping", "attn_softcap", 50.0, "llama.cpp hparams: 50"),
    ("gemma2", "final_logit_softcapping", "final_softcap", 30.0, "llama.cpp hparams: 30"),
    ("gemma3", "final_logit_softcapping", "final_softcap", 0.0, "llama.cpp: gemma 3 final cap 0"),
    ("gemma3", "attn_logit_softcapping", "attn_softcap", 0.0, "llama.cpp: gemma 3 builds no attention cap"),
    ("qwen3", "attention.head_count_kv", "n_kv_heads", 4, "llama.cpp: n_head_kv = n_head"),
    ("llama", "attention.key_length", "head_dim", 64, "llama.cpp: n_embd / n_head"),
    ("gemma3", "attention.key_length", "head_dim", 64, "llama.cpp: n_embd / n_head"),
    ("llama", "rope.scaling.type", "rope_scaling", "none", "llama.cpp: linear with factor 1"),
]


def write_gguf(path, arch: str, keys: dict, extra: list[bytes] = ()) -> None:
    def entry(k, v):
        if isinstance(v, float):
            return kv(f"{arch}.{k}", F32, v)
        return kv(f"{arch}.{k}", U32, v)
    items = [kv("general.architecture", STR, arch)] + [entry(k, v) for k, v in keys.items()] + list(extra)
    path.write_bytes(gguf(items, []))


def gguf_config(tmp_path, arch: str, omit: str = "", extra: list[bytes] = (), **over) -> dict:
    keys = {k: v for k, v in (base_keys(arch) | over).items() if k != omit}
    path = tmp_path / f"{arch}.gguf"
    write_gguf(path, arch, keys, extra)
    return akunu.load_config(path).as_dict()


@pytest.mark.parametrize(("arch", "key", "field", "expected", "source"), GGUF_ROWS,
                         ids=[f"{r[0]}-{r[1]}" for r in GGUF_ROWS])
def test_gguf_default(tmp_path, arch, key, field, expected, source):
    assert key in base_keys(arch) or key not in BASE, "the row's key must be one the base file can leave out"
    got = gguf_config(tmp_path, arch, omit=key)[field]
    assert got == (pytest.approx(expected, rel=1e-6) if isinstance(expected, float) else expected), source


def test_gguf_keys_given_win_over_the_defaults(tmp_path):
    # The inverse of the rows above: every base key is read as written.
    c = gguf_config(tmp_path, "gemma3", **{"rope.freq_base_swa": 5000.0})
    assert (c["rope_theta"], c["rope_theta_local"], c["norm_eps"]) == (20000.0, 5000.0, pytest.approx(1e-5))
    assert (c["max_context"], c["sliding_window"], c["head_dim"], c["n_kv_heads"]) == (1024, 512, 64, 2)


def test_gguf_gemma3_sliding_layers_use_the_local_base(tmp_path):
    c = gguf_config(tmp_path, "gemma3", omit="rope.freq_base_swa")
    assert c["layer_sliding"] == ([True] * 5 + [False]) * 2
    assert (c["rope_theta"], c["rope_theta_local"]) == (20000.0, 10000.0)


def test_gguf_rope_scaling_factor_without_a_type_is_linear(tmp_path):
    for key in ("rope.scaling.factor", "rope.scale_linear"):  # the second is llama.cpp's older key
        c = gguf_config(tmp_path, "llama", extra=[kv(f"llama.{key}", F32, 4.0)])
        assert (c["rope_scaling"], c["rope_factor"]) == ("linear", 4.0), key


@pytest.mark.parametrize(("arch", "layers", "scalar"), [("gemma2", 46, 64.0), ("gemma3", 62, 64.0),
                                                        ("gemma3", 26, 0.0), ("llama", 62, 0.0)])
def test_gguf_gemma_27b_scales_attention_by_dim_per_head(tmp_path, arch, layers, scalar):
    # llama.cpp: gemma 2/3's 27B (known by its layer count) scale by 1/sqrt(n_embd / n_head).
    c = gguf_config(tmp_path, arch, block_count=layers, embedding_length=256, **{"attention.key_length": 128})
    assert c["query_pre_attn_scalar"] == scalar
    assert c["attn_scale"] == pytest.approx((scalar or 128) ** -0.5)


# (model_type, config.json key left out, config field, expected); source: transformers' class.
BASE_JSON = {"num_hidden_layers": 12, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 512, "vocab_size": 100}
HF_ROWS = [
    ("llama", "rms_norm_eps", "norm_eps", 1e-6), ("qwen2", "rms_norm_eps", "norm_eps", 1e-6),
    ("qwen3", "rms_norm_eps", "norm_eps", 1e-6), ("gemma", "rms_norm_eps", "norm_eps", 1e-6),
    ("gemma2", "rms_norm_eps", "norm_eps", 1e-6), ("gemma3_text", "rms_norm_eps", "norm_eps", 1e-6),
    ("bert", "layer_norm_eps", "norm_eps", 1e-12),
    ("llama", "rope_theta", "rope_theta", 10000.0), ("gemma3_text", "rope_theta", "rope_theta", 1e6),
    ("gemma3_text", "rope_local_base_freq", "rope_theta_local", 10000.0),
    ("llama", "max_position_embeddings", "max_context", 2048),
    ("qwen2", "max_position_embeddings", "max_context", 32768),
    ("qwen3", "max_position_embeddings", "max_context", 32768),
    ("gemma", "max_position_embeddings", "max_context", 8192),
    ("gemma2", "max_position_embeddings", "max_context", 8192),
    ("gemma3_text", "max_position_embeddings", "max_context", 131072),
    ("bert", "max_position_embeddings", "max_context", 512),
    ("llama", "head_dim", "head_dim", 64), ("qwen2", "head_dim", "head_dim", 64),
    ("qwen3", "head_dim", "head_dim", 128), ("gemma", "head_dim", "head_dim", 256),
    ("gemma2", "head_dim", "head_dim", 256), ("gemma3_text", "head_dim", "head_dim", 256),
    ("gemma2", "query_pre_attn_scalar", "query_pre_attn_scalar", 256.0),
    ("gemma3_text", "query_pre_attn_scalar", "query_pre_attn_scalar", 256.0),
    ("gemma2", "sliding_window", "sliding_window", 4096), ("gemma3_text", "sliding_window", "sliding_window", 4096),
    ("qwen2", "use_sliding_window", "sliding_window", 0), ("qwen3", "use_sliding_window", "sliding_window", 0),
    ("llama", "tie_word_embeddings", "tied_embeddings", False),
    ("qwen3", "tie_word_embeddings", "tied_embeddings", False),
    ("gemma", "tie_word_embeddings", "tied_embeddings", True),
    ("gemma2", "attn_logit_softcapping", "attn_softcap", 50.0),
    ("gemma2", "final_logit_softcapping", "final_softcap", 30.0),
    ("bert", "type_vocab_size", "n_token_types", 2),
]
# Left out of the table: num_key_value_heads. akunu takes num_attention_heads, as llama's config
# class does; qwen2/3's and gemma2/3's classes default to their default size's count (32, 4),
# which fits no other size.
# Where transformers keeps the value under another attribute (transformers 5: rope_parameters).
TRANSFORMERS_ATTR = {"rope_theta": lambda c: c.rope_parameters.get("full_attention", c.rope_parameters)["rope_theta"],
                     "rope_local_base_freq": lambda c: c.rope_parameters["sliding_attention"]["rope_theta"],
                     "use_sliding_window": lambda c: c.sliding_window or 0}


def hf_config(model_type: str, omit: str) -> dict:
    j = {"model_type": model_type} | BASE_JSON | {"sliding_window": 512, "use_sliding_window": True,
                                                  "head_dim": 64, "max_position_embeddings": 1024}
    j.pop(omit, None)
    if omit == "use_sliding_window":
        j["sliding_window"] = 4096
    return _akunu.config_from_json(json.dumps(j)).as_dict()


@pytest.mark.parametrize(("model_type", "key", "field", "expected"), HF_ROWS, ids=[f"{r[0]}-{r[1]}" for r in HF_ROWS])
def test_config_json_default(model_type, key, field, expected):
    got = hf_config(model_type, key)[field]
    assert got == (pytest.approx(expected, rel=1e-6) if isinstance(expected, float) else expected)


@pytest.mark.parametrize(("model_type", "key", "field", "expected"), HF_ROWS, ids=[f"{r[0]}-{r[1]}" for r in HF_ROWS])
def test_config_json_rows_match_transformers(model_type, key, field, expected):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    kwargs = {k: v for k, v in BASE_JSON.items() if k != key}
    if key == "use_sliding_window":
        kwargs["sliding_window"] = 4096
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    value = TRANSFORMERS_ATTR[key](cfg) if key in TRANSFORMERS_ATTR else getattr(cfg, key, None)
    if key == "head_dim" and value is None:
        value = cfg.hidden_size // cfg.num_attention_heads
    assert value == (pytest.approx(expected, rel=1e-6) if isinstance(expected, float) else expected)
