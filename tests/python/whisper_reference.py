"""A stand-in for `_akunu.WhisperModel` built on transformers' WhisperForConditionalGeneration
(float32, CPU), with the same interface, so that akunu.whisper's decoding can be tested where the
engine is absent and compared with it where it is present.

It opens an HF Whisper directory, or a CTranslate2 one (model.bin, config.json, tokenizer.json:
the form tiny.en ships in), whose fused q|k|v rows are split into HF's tensors here. Sequence
slots are per-slot transformers caches (self-attention KV and the cross-attention K/V of the
slot's audio); `decode` runs the slots one after another.
"""
from __future__ import annotations

import contextlib
import copy
import json
import pathlib
import struct

import numpy as np

# ---------------------------------------------------------------- CTranslate2 model.bin -> HF

_CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path) -> dict[str, np.ndarray]:
    """Every variable of a CTranslate2 model.bin (binary version 6), aliases resolved."""
    data = pathlib.Path(path).read_bytes()
    pos = 0

    def num(fmt):
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    def string():
        nonlocal pos
        n = num("<H")
        pos += n
        return data[pos - n:pos - 1].decode()

    num("<I"), string(), num("<I")  # version, spec name, revision
    out = {}
    for _ in range(num("<I")):
        name = string()
        dims = [num("<I") for _ in range(num("<B"))]
        dtype = np.dtype(_CT2_DTYPES[num("<B")])
        nbytes = num("<I")
        out[name] = np.frombuffer(data, dtype, nbytes // dtype.itemsize, pos).reshape(dims)
        pos += nbytes
    for _ in range(num("<I")):
        alias, target = string(), string()
        out[alias] = out[target]
    return out


def _split_rows(w, n):
    return np.split(np.asarray(w, np.float32), n, axis=0)


def _ct2_attention(v, src, dst, fused_qkv):
    sd = {f"{dst}_layer_norm.weight": v[f"{src}/layer_norm/gamma"],
          f"{dst}_layer_norm.bias": v[f"{src}/layer_norm/beta"]}
    if fused_qkv:
        q, k, val = _split_rows(v[f"{src}/linear_0/weight"], 3)
        qb, _, vb = _split_rows(v[f"{src}/linear_0/bias"], 3)
        out = "linear_1"
    else:
        q, qb = v[f"{src}/linear_0/weight"], v[f"{src}/linear_0/bias"]
        k, val = _split_rows(v[f"{src}/linear_1/weight"], 2)
        _, vb = _split_rows(v[f"{src}/linear_1/bias"], 2)
        out = "linear_2"
    sd.update({f"{dst}.q_proj.weight": q, f"{dst}.q_proj.bias": qb, f"{dst}.k_proj.weight": k,
               f"{dst}.v_proj.weight": val, f"{dst}.v_proj.bias": vb,
               f"{dst}.out_proj.weight": v[f"{src}/{out}/weight"], f"{dst}.out_proj.bias": v[f"{src}/{out}/bias"]})
    return sd


def ct2_state_dict(v) -> dict[str, np.ndarray]:
    """HF WhisperForConditionalGeneration tensors from CTranslate2's Whisper variables."""
    sd = {}
    for side in ("encoder", "decoder"):
        sd[f"model.{side}.embed_positions.weight"] = v[f"{side}/position_encodings/encodings"]
        sd[f"model.{side}.layer_norm.weight"] = v[f"{side}/layer_norm/gamma"]
        sd[f"model.{side}.layer_norm.bias"] = v[f"{side}/layer_norm/beta"]
        i = 0
        while f"{side}/layer_{i}/ffn/linear_0/weight" in v:
            src, dst = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
            sd.update(_ct2_attention(v, f"{src}/self_attention", f"{dst}.self_attn", True))
            if side == "decoder":
                sd.update(_ct2_attention(v, f"{src}/attention", f"{dst}.encoder_attn", False))
            sd[f"{dst}.final_layer_norm.weight"] = v[f"{src}/ffn/layer_norm/gamma"]
            sd[f"{dst}.final_layer_norm.bias"] = v[f"{src}/ffn/layer_norm/beta"]
            for j, name in enumerate(("fc1", "fc2")):
                sd[f"{dst}.{name}.weight"] = v[f"{src}/ffn/linear_{j}/weight"]
                sd[f"{dst}.{name}.bias"] = v[f"{src}/ffn/linear_{j}/bias"]
            i += 1
        sd[f"_{side}_layers"] = i
    for n in ("conv1", "conv2"):
        sd[f"model.encoder.{n}.weight"] = v[f"encoder/{n}/weight"]
        sd[f"model.encoder.{n}.bias"] = v[f"encoder/{n}/bias"]
    sd["model.decoder.embed_tokens.weight"] = v["decoder/embeddings/weight"]
    sd["proj_out.weight"] = v["decoder/embeddings/weight"]
    return sd


def _ct2_model(folder: pathlib.Path):
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    sd = ct2_state_dict(read_ct2(folder / "model.bin"))
    extra = json.loads((folder / "config.json").read_text())
    n_enc, n_dec = sd.pop("_encoder_layers"), sd.pop("_decoder_layers")
    vocab, d_model = sd["model.decoder.embed_tokens.weight"].shape
    heads = int(np.asarray(read_ct2(folder / "model.bin")["decoder/num_heads"]))
    cfg = WhisperConfig(vocab_size=vocab, d_model=d_model, encoder_layers=n_enc, decoder_layers=n_dec,
                        encoder_attention_heads=heads, decoder_attention_heads=heads,
                        encoder_ffn_dim=sd["model.encoder.layers.0.fc1.weight"].shape[0],
                        decoder_ffn_dim=sd["model.decoder.layers.0.fc1.weight"].shape[0],
                        num_mel_bins=sd["model.encoder.conv1.weight"].shape[1],
                        max_source_positions=sd["model.encoder.embed_positions.weight"].shape[0],
                        max_target_positions=sd["model.decoder.embed_positions.weight"].shape[0],
                        decoder_start_token_id=50258 if vocab >= 51865 else 50257, eos_token_id=50257 if vocab >= 51865
                        else 50256, pad_token_id=50256, begin_suppress_tokens=extra.get("suppress_ids_begin"),
                        suppress_tokens=extra.get("suppress_ids"), attn_implementation="eager")
    model = WhisperForConditionalGeneration(cfg)
    model.load_state_dict({k: torch.from_numpy(np.asarray(a, np.float32).copy()) for k, a in sd.items()}, strict=False)
    return model, extra.get("alignment_heads")


# ---------------------------------------------------------------- the WhisperModel stand-in


def transformers_mel(samples, n_mels: int = 80) -> np.ndarray:
    """transformers' WhisperFeatureExtractor log-mel [n_mels, n // 160] of samples as given
    (no padding to 30 s; the STFT's last frame dropped)."""
    from transformers import WhisperFeatureExtractor

    samples = np.asarray(samples, np.float32)
    fe = WhisperFeatureExtractor(feature_size=n_mels)
    return fe._np_extract_fbank_features(samples[None], "cpu")[0].astype(np.float32)


@contextlib.contextmanager
def _one_thread():
    """One torch thread while the reference runs: its steps are small, and on a busy machine
    OpenMP's threads spend most of a step waiting for each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class ReferenceWhisperModel:
    """`_akunu.WhisperModel`'s interface on transformers (float32, CPU)."""

    def __init__(self, model, folder: pathlib.Path, fmt: str, alignment_heads, max_sequences: int):
        import akunu

        self._m = model.eval()
        self._folder = folder
        self.max_sequences = max_sequences
        self.tokenizer = akunu.Tokenizer.from_file(folder / "tokenizer.json")
        c = model.config
        gen = folder / "generation_config.json"
        gen = json.loads(gen.read_text()) if gen.exists() else {}
        self.config = dict(
            n_mels=c.num_mel_bins, n_audio_ctx=c.max_source_positions, n_text_ctx=c.max_target_positions,
            d_model=c.d_model, n_vocab=c.vocab_size, encoder_layers=c.encoder_layers, decoder_layers=c.decoder_layers,
            heads=c.decoder_attention_heads, format=fmt, eos=c.eos_token_id, sot=c.decoder_start_token_id,
            alignment_heads=alignment_heads if alignment_heads is not None else gen.get("alignment_heads"),
            suppress_tokens=list(c.suppress_tokens or gen.get("suppress_tokens") or []),
            begin_suppress_tokens=list(c.begin_suppress_tokens or gen.get("begin_suppress_tokens") or []))
        self._slots = [None] * max_sequences  # per slot: {"audio": [1, 1500, d], "cache", "length"}
        self._encoded = None
        self._cross = None

    @classmethod
    def load(cls, path, device: str = "", tuning: str = "", max_sequences: int = 8, progress=None):
        from transformers import WhisperForConditionalGeneration

        folder = pathlib.Path(path)
        if (folder / "model.bin").exists():
            model, heads = _ct2_model(folder)
            return cls(model, folder, "ct2", heads, max_sequences)
        model = WhisperForConditionalGeneration.from_pretrained(folder, dtype="float32", attn_implementation="eager")
        return cls(model, folder, "hf", None, max_sequences)

    @property
    def mel_filters(self):
        from transformers import WhisperFeatureExtractor

        return WhisperFeatureExtractor(feature_size=self.config["n_mels"]).mel_filters.T.astype(np.float32)

    def mel(self, samples):
        return transformers_mel(samples, self.config["n_mels"])

    def encode(self, mel):
        import torch

        mel = np.asarray(mel, np.float32)
        batch = mel[None] if mel.ndim == 2 else mel
        with torch.no_grad(), _one_thread():
            self._encoded = self._m.model.encoder(torch.from_numpy(batch)).last_hidden_state
        return self._encoded.numpy().copy()

    def _slot(self, seq):
        if not 0 <= seq < self.max_sequences:
            raise IndexError(f"sequence {seq} is out of range: the model has {self.max_sequences} slots")
        if self._slots[seq] is None:
            raise RuntimeError(f"sequence {seq} has no audio: call set_audio({seq}) first")
        return self._slots[seq]

    def set_audio(self, seq: int, window: int = 0):
        from transformers import DynamicCache, EncoderDecoderCache

        if self._encoded is None:
            raise RuntimeError("set_audio before any encode")
        self._slots[seq] = {"audio": self._encoded[window:window + 1],
                            "cache": EncoderDecoderCache(DynamicCache(), DynamicCache()), "length": 0}

    def reset(self, seq: int):
        from transformers import DynamicCache, EncoderDecoderCache

        if self._slots[seq] is not None:
            s = self._slots[seq]
            s["cache"], s["length"] = EncoderDecoderCache(DynamicCache(), DynamicCache()), 0

    def length(self, seq: int) -> int:
        return self._slot(seq)["length"]

    def truncate(self, seq: int, n: int):
        s = self._slot(seq)
        s["cache"].crop(n)
        s["length"] = min(s["length"], n)

    def copy_sequence(self, src: int, dst: int):
        s = self._slot(src)
        cache = copy.copy(s["cache"])  # the cross-attention K/V, computed once, are shared
        cache.self_attention_cache = copy.deepcopy(s["cache"].self_attention_cache)
        cache.is_updated = dict(s["cache"].is_updated)
        self._slots[dst] = {"audio": s["audio"], "cache": cache, "length": s["length"]}

    def decode(self, seqs, tokens, all_logits: bool = False):
        import torch

        rows, cross = [], []
        for seq, toks in zip(seqs, tokens):
            s = self._slot(seq)
            if s["length"] + len(toks) > self.config["n_text_ctx"]:
                raise ValueError(f"sequence {seq}: {s['length']} + {len(toks)} tokens exceed the "
                                 f"{self.config['n_text_ctx']} text positions")
            ids = torch.tensor([list(toks)], dtype=torch.long)
            pos = torch.arange(s["length"], s["length"] + len(toks))
            with torch.no_grad(), _one_thread():
                out = self._m.model.decoder(input_ids=ids, encoder_hidden_states=s["audio"], cache=s["cache"],
                                            use_cache=True, output_attentions=True, cache_position=pos)
                logits = self._m.proj_out(out.last_hidden_state[0])
            s["length"] += len(toks)
            rows.append(logits if all_logits else logits[-1:])
            cross.append(out.cross_attentions)  # per layer [1, heads, rows, 1500]
        self._cross = cross
        return torch.cat(rows).numpy().astype(np.float32)

    def cross_attention(self, layer: int):
        import torch

        return torch.cat([c[layer][0].permute(1, 0, 2) for c in self._cross]).numpy().copy()

    def kv(self, seq: int, layer: int):
        cache = self._slot(seq)["cache"].self_attention_cache
        return cache.layers[layer].keys[0].numpy().copy(), cache.layers[layer].values[0].numpy().copy()


# ---------------------------------------------------------------- engines for the tests

ENGINE_MISSING = "the Whisper engine is not built in this checkout"


def open_engine(kind: str, path, max_sequences: int = 8):
    """The model at path on akunu's engine ("akunu") or on this reference ("reference"), or a
    pytest skip saying why it cannot run here."""
    import pytest

    if kind == "akunu":
        from akunu import _akunu

        if not hasattr(_akunu, "WhisperModel"):
            pytest.skip(ENGINE_MISSING)
        # The CPU backend: tiny.en's 30-s windows take lavapipe minutes each, and the engine's
        # kernels are checked on both backends by test_whisper_engine.py's random model.
        return _akunu.WhisperModel.load(str(path), "cpu", "", max_sequences, False)
    pytest.importorskip("torch", reason="the reference needs torch")
    pytest.importorskip("transformers", reason="the reference needs transformers")
    return ReferenceWhisperModel.load(path, max_sequences=max_sequences)
