"""WordPiece (BERT) tokenizers against Hugging Face tokenizers: vocabularies trained here on the
Python standard library, cased and uncased, loaded from tokenizer.json and from a GGUF written
the way llama.cpp's converter writes one; ids and decoded text must match exactly."""
from __future__ import annotations

import unicodedata

import pytest

import akunu

tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is the reference")
gguf = pytest.importorskip("gguf", reason="gguf-py writes the GGUF vocabulary")

from support.bert_reference import add_bert_vocab, wordpiece_tokenizer  # noqa: E402

TEXTS = [
    "",
    " ",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "import os, sys; print(os.path.join('a', \"b\"))  # comment",
    "a+b=c; x<y>z | ~tilde ^caret `backtick` $dollar @at #hash %pct &amp *star",
    "café naïve résumé",                                    # NFC accents
    unicodedata.normalize("NFD", "café naïve résumé"),      # the same, decomposed
    "ÅNGSTRÖM Zürich São Paulo",
    "İstanbul ΣΟΦΙΑ Ελληνικά Русский",
    "中文字符测试，日本語のテキスト。",
    "ひらがな カタカナ 한국어 텍스트",
    "emoji 😀 👍🏽 🇯🇵 and ✓ ★",
    "control\x00chars\x07here\x1b[0m and\u200bzero\ufeffwidth\u00adsoft",
    "tabs\tnew\nlines\r\nand\u00a0nbsp\u3000ideographic\u2028sep",
    "unassigned \u0378 private \ue000 replacement \ufffd",
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "don't do not it's we're they've I'm isn't",
    "[CLS] special [SEP] tokens [MASK] in [UNK] text [PAD]",
    "numbers 3.14159 1,000,000 2024-01-01 0x1F",
    "mixed CamelCase snake_case kebab-case SCREAMING_CASE",
    "   leading and trailing spaces   ",
    "punctuation!!! ??? ... ,,, ;;; ::: --- ___ ''' \"\"\" «quotes» „low“ ‹single›",
    "dashes – — ― and ellipsis … and bullets • ·",
]

CONFIGS = {
    "uncased": dict(lowercase=True),
    "cased": dict(lowercase=False),
    "uncased-keep-accents": dict(lowercase=True, strip_accents=False),
    "cased-strip-accents": dict(lowercase=False, strip_accents=True),
    "short-words": dict(lowercase=True, max_chars=12),
}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """{config: (HF tokenizer, akunu tokenizer loaded from the HF tokenizer.json)}"""
    out = {}
    for name, kw in CONFIGS.items():
        hf = wordpiece_tokenizer(**kw)
        path = tmp_path_factory.mktemp(name) / "tokenizer.json"
        hf.save(str(path))
        out[name] = (hf, akunu.Tokenizer.from_file(path))
    return out


@pytest.mark.parametrize("config", list(CONFIGS))
def test_encode_matches_hf(pairs, config):
    hf, ak = pairs[config]
    for text in TEXTS:
        for special in (True, False):
            want = hf.encode(text, add_special_tokens=special).ids
            assert ak.encode(text, add_special_tokens=special) == want, (config, text, special)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_decode_matches_hf(pairs, config):
    hf, ak = pairs[config]
    for text in TEXTS:
        ids = hf.encode(text).ids
        for skip in (True, False):
            assert ak.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), (config, text)


def test_unknown_words_and_the_word_limit(pairs):
    hf, ak = pairs["short-words"]
    unk = hf.token_to_id("[UNK]")
    assert ak.encode("abcdefghijklm", add_special_tokens=False) == [unk]  # 13 chars > 12
    ids = ak.encode("abcdefghijkl", add_special_tokens=False)              # 12 chars: pieces
    assert ids == hf.encode("abcdefghijkl", add_special_tokens=False).ids and unk not in ids
    # A character the vocabulary lacks makes its whole word [UNK] (not just that piece).
    assert ak.encode("ab\u0d9e", add_special_tokens=False) == [unk]


def test_template_adds_cls_and_sep(pairs):
    hf, ak = pairs["uncased"]
    ids = ak.encode("hello")
    assert ids[0] == hf.token_to_id("[CLS]") and ids[-1] == hf.token_to_id("[SEP]")
    assert ak.encode("") == [hf.token_to_id("[CLS]"), hf.token_to_id("[SEP]")]


def test_bert_processing_post_processor(tmp_path, pairs):
    """The older BertProcessing post-processor gives the same template."""
    from tokenizers import processors

    hf, _ = pairs["uncased"]
    hf2 = tokenizers.Tokenizer.from_str(hf.to_str())
    hf2.post_processor = processors.BertProcessing(("[SEP]", hf.token_to_id("[SEP]")),
                                                   ("[CLS]", hf.token_to_id("[CLS]")))
    hf2.save(str(tmp_path / "tokenizer.json"))
    ak = akunu.Tokenizer.from_file(tmp_path / "tokenizer.json")
    for text in TEXTS[:8]:
        assert ak.encode(text) == hf2.encode(text).ids


def test_gguf_vocabulary_matches_hf(tmp_path, pairs):
    """llama.cpp's phantom-space vocabulary ("##x" -> "x", "x" -> "\u2581x") read back."""
    hf, _ = pairs["uncased"]
    path = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(str(path), "bert")
    add_bert_vocab(w, hf)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ak = akunu.Tokenizer.from_file(path)
    assert ak.vocab_size == hf.get_vocab_size()
    for text in TEXTS:
        assert ak.encode(text) == hf.encode(text).ids, text
        ids = hf.encode(text).ids
        assert ak.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True), text


def test_missing_unk_token_is_a_clear_error(tmp_path, pairs):
    hf, _ = pairs["uncased"]
    import json

    doc = json.loads(hf.to_str())
    doc["model"]["unk_token"] = "[NOPE]"
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(akunu.Error, match=r"unk_token '\[NOPE\]' is not in the vocabulary"):
        akunu.Tokenizer.from_file(tmp_path / "tokenizer.json")
