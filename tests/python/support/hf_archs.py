"""Tiny random models of the decoder architectures akunu runs, built at test time: a transformers
model saved with save_pretrained (safetensors in float32, and in bfloat16: the values are exact
in both and in float16), its GGUF (f16 and q8_0) written with gguf-py the way llama.cpp's
convert_hf_to_gguf.py writes that architecture, and transformers' float64 forward as the
reference. Nothing is downloaded.

One ArchCase per architecture variant; build(case, dir) makes the files and references. The GGUF conventions
followed (convert_hf_to_gguf.py, conversion/{llama,gemma,qwen}.py):
- MistralForCausalLM converts as general.architecture "llama": Q and K rows (and biases) permuted
  per head for interleaved RoPE, vocab_size and rope.dimension_count written, no sliding-window
  key (the converter writes none for llama; `gguf_window=True` adds llama.attention.sliding_window
  as a GGUF may carry it).
- Gemma and Gemma2 write their keys by hand (no rope.freq_base: llama.cpp's default 1e4), skip
  lm_head, store every *norm.weight as w + 1; Gemma2 adds attn_logit_softcapping,
  final_logit_softcapping and attention.sliding_window (no query_pre_attn_scalar: llama.cpp scales
  by 1/sqrt(head_dim)).
- Qwen2 keeps HF's row order and writes the q/k/v biases.
f16 files: 2-D weights F16, 1-D tensors and norms F32. q8_0 files: 2-D weights Q8_0 (token_embd
too) where rows are whole 32-element blocks, else F16 (the converter's fallback); their reference
is the HF model with those weights replaced by their Q8_0 round trip.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/install.sh installs it)")
transformers = pytest.importorskip("transformers",
                                   reason="transformers is not installed (scripts/install.sh installs it)")
gguf = pytest.importorskip("gguf", reason="gguf-py is not installed (scripts/install.sh installs it)")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (scripts/install.sh installs it)")


@dataclasses.dataclass(frozen=True)
class ArchCase:
    name: str            # test id
    model_type: str      # HF config.json model_type
    gguf_arch: str       # general.architecture the converter writes
    config: dict         # HF config fields beyond the tokenizer's vocabulary
    window: int = 0      # sliding window in tokens (0: none), for choosing prompt lengths
    gguf_window: bool = False  # write <arch>.attention.sliding_window where the converter does not
    gguf_exact: bool = True    # False: the HF config holds what GGUF cannot say (HF-only case)
    config_patch: dict = dataclasses.field(default_factory=dict)  # config.json edits after saving (None: drop)


def _rope(theta):
    return {"rope_type": "default", "rope_theta": theta}


# Odd-ish shapes: q_dim != dim, GQA and MQA, head_dim a multiple of 8 but not of 32 where
# the architecture allows; windows short enough that 40-token prompts slide past them.
CASES = [
    ArchCase("gemma", "gemma", "gemma", dict(
        hidden_size=96, intermediate_size=176, num_hidden_layers=3, num_attention_heads=3, num_key_value_heads=1,
        head_dim=40, rms_norm_eps=1e-6, rope_parameters=_rope(10000.0), hidden_act="gelu_pytorch_tanh",
        tie_word_embeddings=True)),
    ArchCase("gemma2", "gemma2", "gemma2", dict(
        hidden_size=128, intermediate_size=224, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, rms_norm_eps=1e-6, rope_parameters=_rope(10000.0), hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=32, sliding_window=12, attn_logit_softcapping=4.0, final_logit_softcapping=8.0,
        tie_word_embeddings=True), window=12),
    # Gemma2 as HF runs it with query_pre_attn_scalar != head_dim (the 27B's n_embd / n_head) and
    # transformers' default caps: safetensors only, GGUF has no key for the scalar.
    ArchCase("gemma2-qpas", "gemma2", "gemma2", dict(
        hidden_size=144, intermediate_size=160, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        head_dim=48, rms_norm_eps=1e-6, rope_parameters=_rope(10000.0), hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=72, sliding_window=9, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
        tie_word_embeddings=True), window=9, gguf_exact=False),
    ArchCase("mistral", "mistral", "llama", dict(
        hidden_size=160, intermediate_size=272, num_hidden_layers=3, num_attention_heads=5, num_key_value_heads=1,
        head_dim=32, rms_norm_eps=1e-5, rope_parameters=_rope(10000.0), sliding_window=10, tie_word_embeddings=False),
        window=10, gguf_window=True),
    ArchCase("qwen2", "qwen2", "qwen2", dict(
        hidden_size=112, intermediate_size=240, num_hidden_layers=2, num_attention_heads=7, num_key_value_heads=1,
        rms_norm_eps=1e-6, rope_parameters=_rope(1000000.0), use_sliding_window=False, sliding_window=8,
        max_window_layers=1, tie_word_embeddings=True),
        # As Qwen2's own config.json files read: a window written but not used, no layer_types.
        config_patch={"sliding_window": 8, "layer_types": None}),
]
CASE = {c.name: c for c in CASES}


# ---------------------------------------------------------------------------------------------
# Tokenizer: byte-level BPE trained on a fixed text, so a model directory and a GGUF have one.
# ---------------------------------------------------------------------------------------------

_TEXT = ("def forward(self, hidden_states, attention_mask=None):\n    return self.norm(hidden_states)\n"
         "The quick brown fox jumps over the lazy dog. Sliding windows, soft caps and biases.\n") * 8
SPECIALS = ["<bos>", "<eos>"]


def write_tokenizer(path: pathlib.Path, vocab_size: int = 320) -> dict:
    """tokenizer.json in `path`; returns its JSON."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([_TEXT], trainer)
    tok.save(str(path / "tokenizer.json"))
    return json.loads((path / "tokenizer.json").read_text())


def _gguf_tokenizer(w, tok_json: dict, vocab: int) -> None:
    by_id = {i: t for t, i in tok_json["model"]["vocab"].items()}
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(vocab)]
    types = [gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok_json["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([int(t) for t in types])
    w.add_token_merges(merges)
    w.add_bos_token_id(SPECIALS.index("<bos>"))
    w.add_eos_token_id(SPECIALS.index("<eos>"))


# ---------------------------------------------------------------------------------------------
# The HF model
# ---------------------------------------------------------------------------------------------

def _init(model, seed: int, norm_plus_one: bool) -> None:
    """Weights from one seeded stream over the sorted names, every value exact in bfloat16 and
    float16: linear N(0, 0.05) (q/k N(0, 0.12), so that attention is far from uniform and soft
    caps bite), biases N(0, 0.3), embeddings N(0, 0.25), lm_head N(0, 0.1), RMSNorm scales
    1 + 0.2 N(0, 1) (gemma stores w = 0.2 N(0, 1))."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            n = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if "norm" in name:
                v = 0.2 * n + (0.0 if norm_plus_one else 1.0)
            elif name.endswith("bias"):
                v = 0.3 * n
            elif "embed_tokens" in name:
                v = 0.25 * n
            elif "lm_head" in name:
                v = 0.1 * n
            elif "q_proj" in name or "k_proj" in name:
                v = 0.12 * n
            else:
                v = 0.05 * n
            v = v.to(torch.bfloat16).to(torch.float64)
            v[v.abs() < 2.0 ** -14] = 0  # below float16's normal range a bfloat16 value may not fit
            p.copy_(v.to(p.dtype))


@dataclasses.dataclass
class Built:
    case: ArchCase
    hf_dir: pathlib.Path
    paths: dict          # source ("hf", "gguf", "gguf-q8_0") -> path
    models: dict         # source -> its reference: transformers model, float64, eager attention
    vocab: int

    @property
    def model(self):
        return self.models["hf"]

    def logits(self, ids, source: str = "hf") -> np.ndarray:
        """The reference logits of `source` at every position of `ids`, [len(ids), vocab] float64."""
        with torch.no_grad():
            return self.models[source](torch.tensor([list(ids)])).logits[0].numpy()

    def kv(self, ids, layer: int):
        """transformers' cached K and V of `layer` after `ids`, each [n_kv_heads, rows, head_dim]
        float64: every position, or a sliding layer's last rows only where the cache keeps those."""
        with torch.no_grad():
            cache = self.model(torch.tensor([list(ids)]), use_cache=True).past_key_values
        return cache.layers[layer].keys[0].numpy(), cache.layers[layer].values[0].numpy()

    def greedy(self, ids, n: int, source: str = "hf"):
        """n greedy ids after `ids` by full re-forwards, and each step's top1 - top2 margin."""
        ids, out, margins = list(ids), [], []
        for _ in range(n):
            last = self.logits(ids, source)[-1]
            top2 = np.sort(last)[-2:]
            out.append(int(np.argmax(last)))
            margins.append(float(top2[1] - top2[0]))
            ids.append(out[-1])
        return out, margins


def build(case: ArchCase, root: pathlib.Path, seed: int = 2024) -> Built:
    hf_dir = root / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    tok_json = write_tokenizer(hf_dir)
    vocab = len(tok_json["model"]["vocab"])
    config = transformers.AutoConfig.for_model(case.model_type, vocab_size=vocab, max_position_embeddings=256,
                                               bos_token_id=0, eos_token_id=1, pad_token_id=None, **case.config)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    _init(model, seed, norm_plus_one=case.model_type.startswith("gemma"))
    model.save_pretrained(hf_dir)
    bf16_dir = root / "hf-bf16"  # the same values in bfloat16, as checkpoints usually ship
    # A copy: converting the model itself would also round its RoPE inv_freq buffer to bfloat16.
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(bf16_dir)
    write_tokenizer(bf16_dir)
    for d in (hf_dir, bf16_dir):
        _patch_config(d / "config.json", case.config_patch)
    model = model.to(torch.float64).eval()
    paths, models = {"hf": hf_dir, "hf-bf16": bf16_dir}, {"hf": model, "hf-bf16": model}
    if case.gguf_exact:
        paths["gguf"] = root / f"{case.name}-f16.gguf"
        write_gguf(case, hf_dir, model, tok_json, paths["gguf"])
        paths["gguf-q8_0"] = root / f"{case.name}-q8_0.gguf"
        write_gguf(case, hf_dir, model, tok_json, paths["gguf-q8_0"], q8_0=True)
        models["gguf"] = model
        models["gguf-q8_0"] = q8_0_reference(model)
    return Built(case, hf_dir, paths, models, vocab)


def _patch_config(path: pathlib.Path, patch: dict) -> None:
    saved = json.loads(path.read_text())
    for k, v in patch.items():
        if v is None:
            saved.pop(k, None)
        else:
            saved[k] = v
    path.write_text(json.dumps(saved, indent=2))


def _q8_0_able(a: np.ndarray) -> bool:
    return a.ndim == 2 and a.shape[-1] % 32 == 0


def _q8_0_round_trip(a: np.ndarray) -> np.ndarray:
    q8 = gguf.GGMLQuantizationType.Q8_0
    return gguf.quants.dequantize(gguf.quants.quantize(a.astype(np.float32), q8), q8)


def q8_0_reference(model):
    """The model with every weight a q8_0 GGUF stores as Q8_0 replaced by its round trip (row
    permutations do not change a row's blocks, so the unpermuted weights round-trip alike)."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            a = p.detach().numpy()
            if _q8_0_able(a) and "norm" not in name:
                p.copy_(torch.from_numpy(_q8_0_round_trip(a).astype(np.float64)))
    return ref


# ---------------------------------------------------------------------------------------------
# GGUF, as convert_hf_to_gguf.py writes it
# ---------------------------------------------------------------------------------------------

def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """LlamaModel.permute: rows of each head reordered for interleaved RoPE pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(case: ArchCase, hf_dir: pathlib.Path, model, tok_json: dict, path: pathlib.Path,
               q8_0: bool = False) -> None:
    cfg = json.loads((hf_dir / "config.json").read_text())
    arch = case.gguf_arch
    n_layers, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    gemma = arch.startswith("gemma")
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if not gemma:  # TextModel.set_gguf_parameters; gemma and gemma2 write their own set
        rope = cfg.get("rope_parameters") or {}
        w.add_rope_freq_base(rope.get("rope_theta", cfg.get("rope_theta")))
    if cfg.get("head_dim") is not None:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8_0 else gguf.LlamaFileType.MOSTLY_F16)
    if arch == "llama":
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg.get("head_dim") or cfg["hidden_size"] // heads)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window(cfg["sliding_window"])
    if case.gguf_window and cfg.get("sliding_window"):
        w.add_sliding_window(cfg["sliding_window"])
    _gguf_tokenizer(w, tok_json, cfg["vocab_size"])

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], n_layers)
    for name, t in model.state_dict().items():
        if gemma and name == "lm_head.weight":
            continue
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        a = t.to(torch.float32).numpy().copy()
        if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
            a = _permute(a, heads)
        if arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
            a = _permute(a, kv_heads)
        if gemma and name.endswith("norm.weight"):
            a = a + 1
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, f"no GGUF name for {name}"
        if a.ndim <= 1 or new.endswith("_norm.weight"):
            w.add_tensor(new, a)
        elif q8_0 and _q8_0_able(a):
            q8 = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(new, gguf.quants.quantize(a, q8), raw_dtype=q8)  # bytes: the element shape follows
        else:
            w.add_tensor(new, a.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
