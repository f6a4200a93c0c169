"""Encoder checkpoints as sentence-transformers ships them: the position-id buffer beside the
weights, and the settings files (sentence_bert_config.json, modules.json, the Pooling config)
that make embed()'s defaults those of SentenceTransformer.encode()."""
from __future__ import annotations

import json

import numpy as np
import pytest

import akunu

torch = pytest.importorskip("torch", reason="transformers' BertModel is the reference")
pytest.importorskip("transformers", reason="transformers' BertModel is the reference")
pytest.importorskip("tokenizers", reason="the WordPiece vocabulary is trained with HF tokenizers")
safetensors_torch = pytest.importorskip("safetensors.torch", reason="safetensors writes the checkpoint")

from support.bert_reference import reference_embeddings, tiny_bert, wordpiece_tokenizer  # noqa: E402

ATOL = 2e-4  # as test_encoder.py: f32 rounding against transformers' f32 forward pass
LONG = "The quick brown fox jumps over the lazy dog, again and again, while the cat watches the bird."


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-bert")
    tok = wordpiece_tokenizer(lowercase=True, vocab_size=1500)
    return tiny_bert(d, tok), tok, d


def with_position_ids(src, dst, ids: torch.Tensor):
    """A copy of the checkpoint directory `src` whose safetensors also holds
    embeddings.position_ids, as older transformers saved it."""
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    tensors = safetensors_torch.load_file(dst / "model.safetensors")
    tensors["embeddings.position_ids"] = ids
    safetensors_torch.save_file(tensors, dst / "model.safetensors")
    return dst


def test_position_ids_that_count_are_accepted(bert, tmp_path):
    model, tok, d = bert
    for dtype in (torch.int64, torch.int32):
        p = with_position_ids(d, tmp_path / str(dtype), torch.arange(64, dtype=dtype)[None])
        got = akunu.Encoder(p, progress=False).embed(["hello world", LONG])
        want = reference_embeddings(model, tok, ["hello world", LONG], "mean", True)
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize(("ids", "message"), [
    (torch.arange(64)[None].flip(1), "position ids must count 0, 1, 2, ...; entry 0 holds 63"),
    (torch.arange(65)[None], r"expected position ids I64 \[1, n\] with n <= 64, found I64 \[1, 65\]"),
    (torch.arange(64, dtype=torch.float32)[None], r"expected position ids I64 \[1, n\] .* found F32"),
])
def test_position_ids_that_do_not_count_are_refused(bert, tmp_path, ids, message):
    p = with_position_ids(bert[2], tmp_path / "m", ids)
    with pytest.raises(akunu.Error, match=r"embeddings\.position_ids: " + message):
        akunu.Encoder(p, progress=False)


def write_sentence_transformers(d, max_seq_length: int, pooling: str, normalize: bool, lowercase=False):
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length,
                                                             "do_lower_case": lowercase}))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (d / "modules.json").write_text(json.dumps(modules))
    (d / "1_Pooling").mkdir(exist_ok=True)
    modes = {f"pooling_mode_{m}": m.startswith(pooling) for m in ("cls_token", "mean_tokens", "max_tokens")}
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 96} | modes))


@pytest.mark.parametrize(("pooling", "normalize"), [("cls", False), ("mean", True)])
def test_sentence_transformers_files_set_the_defaults(bert, tmp_path, pooling, normalize):
    model, tok, d = bert
    p = with_position_ids(d, tmp_path / "m", torch.arange(64)[None])
    write_sentence_transformers(p, 16, pooling, normalize)
    e = akunu.Encoder(p, progress=False)
    s = e.embed_settings
    assert (s.pooling, s.normalize, s.max_tokens, s.lowercase) == (pooling, normalize, 16, False)
    ids = tok.encode(LONG).ids
    assert len(ids) > 16
    cut = ids[:15] + ids[-1:]  # sentence-transformers' truncation to max_seq_length
    want = reference_embeddings(model, tok, None, pooling, normalize, ids=[cut])
    np.testing.assert_allclose(e.embed([LONG]), want, atol=ATOL, rtol=0)
    # Every default can be overridden: the whole text, the other pooling and normalization.
    other = "mean" if pooling == "cls" else "cls"
    full = reference_embeddings(model, tok, None, other, not normalize, ids=[ids])
    np.testing.assert_allclose(e.embed([LONG], pooling=other, normalize=not normalize, max_tokens=64), full,
                               atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match=r"bert takes at most 16 \(sentence_bert_config.json's max_seq_length\)"):
        e.embed([LONG], truncate=False)
    with pytest.raises(ValueError, match="max_tokens must be an integer from 2 to 64"):
        e.embed([LONG], max_tokens=65)


def test_an_unsupported_pooling_mode_is_named(bert, tmp_path):
    p = with_position_ids(bert[2], tmp_path / "m", torch.arange(64)[None])
    write_sentence_transformers(p, 16, "max", False)
    e = akunu.Encoder(p, progress=False)
    with pytest.raises(ValueError, match=r"not 'max' \(from sentence_bert_config.json, modules.json\)"):
        e.embed(["a"])
    assert e.embed(["a"], pooling="mean").shape == (1, 96)


def test_do_lower_case_lowercases_the_text(tmp_path):
    tok = wordpiece_tokenizer(lowercase=False, vocab_size=1500)  # a cased vocabulary
    d = tmp_path / "cased"
    d.mkdir()
    tiny_bert(d, tok)
    assert tok.encode("Hello World").ids != tok.encode("hello world").ids
    write_sentence_transformers(d, 64, "mean", True, lowercase=False)
    cased = akunu.Encoder(d, progress=False)
    assert not np.allclose(cased.embed(["Hello World"]), cased.embed(["hello world"]), atol=1e-3)
    write_sentence_transformers(d, 64, "mean", True, lowercase=True)
    lower = akunu.Encoder(d, progress=False)
    np.testing.assert_array_equal(lower.embed(["Hello World"]), cased.embed(["hello world"]))
