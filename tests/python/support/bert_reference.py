"""Builders for the BERT tests: a WordPiece tokenizer trained at test time with HF tokenizers,
a tiny random transformers BertModel saved as safetensors, and the same model written as a
GGUF the way llama.cpp's convert_hf_to_gguf.py BertModel class writes one."""
from __future__ import annotations

import pathlib
import sysconfig

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Extra training text so that accented, CJK and other scripts reach the vocabulary.
EXTRA = ("café naïve résumé Ångström Zürich São Paulo El Niño façade coöperate crème brûlée "
         "中文字符测试 日本語のテキスト ひらがな カタカナ 한국어 텍스트 Русский текст Ελληνικά "
         "İstanbul ΣΟΦΙΑ don't it's we're they've I'm ") * 20


def training_text(max_files: int = 40) -> list[str]:
    """Python standard-library sources (always on disk) plus EXTRA."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py"))[:max_files]
    return [f.read_text(encoding="utf-8", errors="replace") for f in files] + [EXTRA]


def wordpiece_tokenizer(lowercase: bool, vocab_size: int = 3000, max_chars: int = 100, strip_accents=None):
    """An HF tokenizers Tokenizer configured as BERT's, with a WordPiece vocabulary trained here."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=max_chars))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS)
    tok.train_from_iterator(training_text(), trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def phantom_vocab(tok) -> tuple[list[str], list[int]]:
    """The token list and types llama.cpp's BertModel.set_vocab writes: control tokens as they
    are, "##x" as "x", every other token as "\u2581x"."""
    import gguf

    by_id = {i: t for t, i in tok.get_vocab(with_added_tokens=True).items()}
    tokens, types = [], []
    for i in range(len(by_id)):
        t = by_id[i]
        if t in SPECIALS:
            tokens.append(t)
            types.append(int(gguf.TokenType.CONTROL))
        else:
            tokens.append(t[2:] if t.startswith("##") else "\u2581" + t)
            types.append(int(gguf.TokenType.NORMAL))
    return tokens, types


def add_bert_vocab(writer, tok, cls_keys: bool = False) -> None:
    """Tokenizer metadata as the converter writes it for BERT ([CLS] as BOS, [SEP] as EOS and
    separator, both added); cls_keys: as llama.cpp's own BERT files, with cls_token_id and
    seperator_token_id but no BOS or EOS."""
    tokens, types = phantom_vocab(tok)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_unk_token_id(tok.token_to_id("[UNK]"))
    if cls_keys:
        writer.add_uint32("tokenizer.ggml.cls_token_id", tok.token_to_id("[CLS]"))
    else:
        writer.add_bos_token_id(tok.token_to_id("[CLS]"))
        writer.add_eos_token_id(tok.token_to_id("[SEP]"))
    writer.add_sep_token_id(tok.token_to_id("[SEP]"))
    writer.add_pad_token_id(tok.token_to_id("[PAD]"))
    writer.add_mask_token_id(tok.token_to_id("[MASK]"))
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)


def tiny_bert(tmp_path: pathlib.Path, tok, hidden=96, layers=3, heads=3, intermediate=200, max_pos=64, seed=0):
    """A random transformers BertModel saved (safetensors, config.json, tokenizer.json) in tmp_path."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=intermediate, max_position_embeddings=max_pos,
                     type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12)
    model = BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():  # larger LayerNorm weights and biases than the defaults (1 and 0)
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save(str(tmp_path / "tokenizer.json"))
    return model


def write_gguf(path: pathlib.Path, model, tok, cls_keys: bool = False) -> None:
    """The model as llama.cpp's converter writes it: arch "bert", the BertModel tensor map, f32
    (cls_keys: the vocabulary's specials as add_bert_vocab says)."""
    import gguf

    c = model.config
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_head_count(c.num_attention_heads)
    w.add_layer_norm_eps(c.layer_norm_eps)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_token_type_count(c.type_vocab_size)
    add_bert_vocab(w, tok, cls_keys)
    names = {
        "embeddings.word_embeddings.weight": "token_embd.weight",
        "embeddings.position_embeddings.weight": "position_embd.weight",
        "embeddings.token_type_embeddings.weight": "token_types.weight",
        "embeddings.LayerNorm.weight": "token_embd_norm.weight",
        "embeddings.LayerNorm.bias": "token_embd_norm.bias",
    }
    per_layer = {
        "attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
        "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
        "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
    }
    for layer in range(c.num_hidden_layers):
        for hf, gg in per_layer.items():
            for kind in ("weight", "bias"):
                names[f"encoder.layer.{layer}.{hf}.{kind}"] = f"blk.{layer}.{gg}.{kind}"
    state = model.state_dict()
    for hf, gg in names.items():
        w.add_tensor(gg, state[hf].detach().numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_embeddings(model, tok, texts, pooling: str, normalize: bool, ids=None) -> np.ndarray:
    """transformers' forward pass over a padded batch of `texts` (or of token `ids`), pooled
    over the attention mask."""
    import torch

    encs = ids if ids is not None else [tok.encode(t).ids for t in texts]
    n = max(len(e) for e in encs)
    ids = torch.zeros((len(encs), n), dtype=torch.long)
    mask = torch.zeros((len(encs), n), dtype=torch.long)
    for i, e in enumerate(encs):
        ids[i, :len(e)] = torch.tensor(e)
        mask[i, :len(e)] = 1
    with torch.no_grad():
        h = model(input_ids=ids, attention_mask=mask).last_hidden_state.double()
    if pooling == "cls":
        out = h[:, 0]
    else:
        m = mask.unsqueeze(-1).double()
        out = (h * m).sum(1) / m.sum(1)
    if normalize:
        out = torch.nn.functional.normalize(out, dim=-1)
    return out.numpy()
