"""BERT encoders: Encoder.embed against transformers' BertModel (a tiny random model with odd
sizes, saved as safetensors and as a GGUF in llama.cpp's layout), batching without leaks
between texts, akunu.load picking the class, and the errors for bad input and for loading an
encoder as a Model (or a decoder as an Encoder)."""
from __future__ import annotations

import numpy as np
import pytest

import akunu

torch = pytest.importorskip("torch", reason="transformers' BertModel is the reference")
pytest.importorskip("transformers", reason="transformers' BertModel is the reference")
pytest.importorskip("tokenizers", reason="the WordPiece vocabulary is trained with HF tokenizers")
gguf = pytest.importorskip("gguf", reason="gguf-py writes the GGUF model")

from support.bert_reference import reference_embeddings, tiny_bert, wordpiece_tokenizer, write_gguf  # noqa: E402

# Lengths from 2 tokens ([CLS] [SEP]) to near the 64 positions, in an order that mixes them.
TEXTS = [
    "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog, again and again, while the cat watches "
    "from the window and the bird sings a song about classes, functions and modules.",
    "café 中文 naïve",
    "import os",
]
# f32 on the GPU against transformers' f32 forward pass compared in float64: the differences
# are rounding (GEMM sums, LayerNorm, softmax, the erf approximation below 1.5e-7).
ATOL = 2e-4


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """(transformers model, HF tokenizer, safetensors dir, GGUF path)."""
    d = tmp_path_factory.mktemp("tiny-bert")
    tok = wordpiece_tokenizer(lowercase=True, vocab_size=1500)
    model = tiny_bert(d, tok)
    g = tmp_path_factory.mktemp("tiny-bert-gguf") / "model.gguf"
    write_gguf(g, model, tok)
    return model, tok, d, g


@pytest.fixture(scope="module")
def models(bert):
    _, _, d, g = bert
    return {"safetensors": akunu.Encoder(d), "gguf": akunu.load(g)}


def test_tokens_cover_a_range_of_lengths(bert):
    _, tok, _, _ = bert
    lengths = [len(tok.encode(t).ids) for t in TEXTS]
    assert min(lengths) == 2 and 30 < max(lengths) <= 64, lengths


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("normalize", [True, False])
def test_embed_matches_transformers(bert, models, fmt, pooling, normalize):
    model, tok, _, _ = bert
    m = models[fmt]
    got = m.embed(TEXTS, pooling=pooling, normalize=normalize)
    want = reference_embeddings(model, tok, TEXTS, pooling, normalize)
    assert got.shape == (len(TEXTS), model.config.hidden_size) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # The texts differ, and so must their embeddings (a test that could not pass by accident).
    assert np.abs(got[0] - got[1]).max() > 10 * ATOL


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_embed_on_the_cpu_backend(bert, fmt):
    """The same encoder on akunu's native CPU backend (its layernorm, encoder_attention, pool and
    erf-GELU kernels) against transformers."""
    model, tok, d, g = bert
    m = akunu.Encoder(d if fmt == "safetensors" else g, device="cpu", progress=False)
    # the CPU backend is the last entry
    assert m.device.name == akunu.devices()[-1]["name"] and m.device.backend == "cpu"
    for pooling, normalize in (("mean", True), ("cls", False)):
        got = m.embed(TEXTS, pooling=pooling, normalize=normalize)
        np.testing.assert_allclose(got, reference_embeddings(model, tok, TEXTS, pooling, normalize), atol=ATOL, rtol=0)


def test_a_text_does_not_depend_on_its_batch(bert, models):
    """Texts are packed without padding and attend only to themselves: alone, in any order,
    or beside long texts, each embedding is the same."""
    m = models["safetensors"]
    together = m.embed(TEXTS, normalize=False)
    for i, t in enumerate(TEXTS):
        np.testing.assert_allclose(m.embed([t], normalize=False)[0], together[i], atol=1e-5, rtol=0)
    order = [3, 1, 5, 0, 4, 2]
    np.testing.assert_allclose(m.embed([TEXTS[i] for i in order], normalize=False), together[order], atol=1e-5, rtol=0)


def test_embed_allocates_nothing_on_the_device(models):
    """The table and its buffers are made at load; a call only writes inputs and replays it."""
    enc = models["gguf"]._encoder
    before = enc.device_allocations
    models["gguf"].embed(TEXTS * 3, pooling="cls")
    assert enc.device_allocations == before


def test_batches_that_fill_up_split_between_texts(bert):
    """With 64 token rows per submission the texts need several submissions; the results are
    those of one large batch."""
    model, tok, d, _ = bert
    small = akunu.load(d, batch_tokens=64)
    assert small.batch_tokens == 64
    many = TEXTS * 4
    got = small.embed(many)
    np.testing.assert_allclose(got, reference_embeddings(model, tok, many, "mean", True), atol=ATOL, rtol=0)


def test_too_long_texts(bert, models):
    model, tok, _, _ = bert
    m = models["safetensors"]
    long_text = " ".join(["word"] * 80)
    ids = tok.encode(long_text).ids
    assert len(ids) > 64
    with pytest.raises(ValueError, match=rf"texts\[1\] has {len(ids)} tokens; bert takes at most 64 .*truncate=True"):
        m.embed(["fine", long_text])
    got = m.embed([long_text], truncate=True)
    cut = ids[:63] + ids[-1:]  # [CLS], 62 tokens, [SEP]: transformers' truncation
    np.testing.assert_allclose(got, reference_embeddings(model, tok, None, "mean", True, ids=[cut]), atol=ATOL, rtol=0)
    # The engine's own check, below the Python one: 64 ids run, 65 raise; so do bad ids.
    enc = m._encoder
    np.testing.assert_allclose(enc.embed([cut], akunu._akunu.Pooling.mean, True), got, atol=1e-6, rtol=0)
    with pytest.raises(akunu.Error, match="text 1 has 65 tokens; the model takes at most 64"):
        enc.embed([[2, 3], ids[:65]], akunu._akunu.Pooling.mean, True)
    with pytest.raises(akunu.Error, match="text 0: token id 1500 is out of range for a vocabulary of 1500"):
        enc.embed([[2, 1500, 3]], akunu._akunu.Pooling.cls, False)
    with pytest.raises(akunu.Error, match="text 0 has no tokens"):
        enc.embed([[]], akunu._akunu.Pooling.cls, False)


def test_bad_input(models):
    m = models["gguf"]
    with pytest.raises(ValueError, match="at least one text"):
        m.embed([])
    with pytest.raises(TypeError, match=r"texts\[1\] is a int, not a str"):
        m.embed(["a", 3])
    with pytest.raises(TypeError, match="wrap a single text in a list"):
        m.embed("a single string")
    with pytest.raises(ValueError, match="pooling must be 'mean' or 'cls'"):
        m.embed(["a"], pooling="max")


def test_load_picks_the_class(bert, models):
    _, _, d, g = bert
    assert isinstance(models["safetensors"], akunu.Encoder) and isinstance(models["gguf"], akunu.Encoder)
    m = models["safetensors"]
    assert m.max_tokens == 64 and m.config.architecture == "bert"
    assert repr(m).startswith(f"Encoder({str(d)!r}, bert, max_tokens=64") and m.device.name in repr(m)
    assert str(m.device) in {e["name"] for e in akunu.devices()}
    kernels = {c["kernel"] for c in m.dispatch_table()}
    assert {"layernorm", "encoder_attention", "act_gelu", "pool"} <= kernels
    ids = m.tokenize("hello world")
    assert m.tokenizer.is_special(ids[0]) and m.tokenizer.is_special(ids[-1])  # [CLS] ... [SEP]
    assert m.detokenize(ids, skip_special_tokens=True) == "hello world"


def test_a_model_refuses_an_encoder(bert):
    """akunu.Model on a BERT file says which class loads it, before anything is allocated."""
    _, _, d, g = bert
    for path in (d, g):
        with pytest.raises(akunu.Error, match=r"bert is an encoder \(an embedding model\), not a causal language "
                                              r"model: load it with akunu\.Encoder\(.*\) \(or akunu\.load"):
            akunu.Model(path)
    # An Encoder never generates (a Model embeds too, by pooling its own hidden states: akunu.decoder_embed).
    assert not hasattr(akunu.Encoder, "generate")


def test_the_engine_refuses_an_encoder(bert):
    _, _, d, _ = bert
    with pytest.raises(akunu.Error, match="is an encoder; decoding needs a causal language model"):
        akunu._akunu.Engine(str(d))


def test_an_encoder_refuses_a_decoder():
    """akunu.Encoder on a causal language model names akunu.Model (there is no last-token
    pooling); akunu.load gives it a Model."""
    from support.fixture_paths import require

    path = require("tiny-llama3-random", "hf")
    with pytest.raises(akunu.Error, match=r"llama is a causal language model, not an encoder: load it with "
                                          r"akunu\.Model\("):
        akunu.Encoder(path)
    with pytest.raises(akunu.Error, match="is a causal language model, not an encoder"):
        akunu._akunu.Encoder(str(path))
    m = akunu.load(path, context=64)
    assert isinstance(m, akunu.Model) and m.context == 64


def test_gguf_with_cls_and_separator_keys_but_no_bos(bert, models, tmp_path):
    """llama.cpp's BERT vocabularies carry cls_token_id and seperator_token_id instead of BOS
    and EOS: such a file used to be refused; it loads with the same [CLS] ... [SEP] texts."""
    model, tok, _, _ = bert
    path = tmp_path / "cls.gguf"
    write_gguf(path, model, tok, cls_keys=True)
    enc = akunu.load(path)
    assert enc.tokenizer.bos_id == tok.token_to_id("[CLS]") and enc.tokenizer.eos_id == tok.token_to_id("[SEP]")
    np.testing.assert_array_equal(enc.embed(TEXTS), models["gguf"].embed(TEXTS))
