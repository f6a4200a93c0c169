// WordPiece from C++: the model's greedy longest-match with "##" continuations, the BERT
// normalizer, pre-tokenizer and decoder on hand-checked cases, and a whole tokenizer.json
// pipeline. tests/python/test_tokenizer_wordpiece.py compares against HF tokenizers at scale.
#include <gtest/gtest.h>

#include "akunu/core/error.h"
#include "akunu/tokenizer/tokenizer.h"
#include "akunu/tokenizer/tokenizer_wordpiece.h"

namespace akunu::test {

static std::unordered_map<std::string, int> vocab() {
    return {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}, {"un", 3}, {"##aff", 4}, {"##able", 5},
            {"hello", 6}, {"!", 7},     {"##s", 8},   {",", 9},  {"cafe", 10}, {"\xE4\xB8\xAD", 11}};  // 中
}

static std::vector<int> pieces(const WordPieceModel& m, const std::string& word) {
    std::vector<int> out;
    m.tokenize(word, out);
    return out;
}

TEST(WordPiece, LongestMatchThenContinuations) {
    const WordPieceModel m(vocab(), "[UNK]", "##", 100, "test");
    EXPECT_EQ(pieces(m, "unaffable"), (std::vector<int>{3, 4, 5}));
    EXPECT_EQ(pieces(m, "hellos"), (std::vector<int>{6, 8}));
    EXPECT_EQ(pieces(m, "unaffablex"), (std::vector<int>{0}));  // no cover: one [UNK] for the word
    EXPECT_EQ(pieces(m, "\xE4\xB8\xAD"), (std::vector<int>{11}));
}

TEST(WordPiece, LongWordsAreUnknown) {
    const WordPieceModel m(vocab(), "[UNK]", "##", 5, "test");
    EXPECT_EQ(pieces(m, "hello"), (std::vector<int>{6}));  // 5 characters: within the limit
    EXPECT_EQ(pieces(m, "hellos"), (std::vector<int>{0}));  // 6
}

TEST(WordPiece, MissingUnknownTokenIsAnError) {
    EXPECT_THROW(WordPieceModel(vocab(), "<unk>", "##", 100, "test"), Error);
}

TEST(WordPiece, BertNormalizer) {
    // Tab to space, \x01 dropped, the ideograph padded, accents stripped, lowercased.
    EXPECT_EQ(bert_normalize("Caf\xC3\xA9\tX\x01\xE4\xB8\xAD", {}), "cafe x \xE4\xB8\xAD ");
    BertNormalizerOptions cased;
    cased.lowercase = cased.strip_accents = false;
    EXPECT_EQ(bert_normalize("Caf\xC3\xA9", cased), "Caf\xC3\xA9");
    EXPECT_EQ(bert_normalize("\xC4\xB0", {}), "i");  // U+0130: NFD, the dot stripped, then lowercased
    BertNormalizerOptions keep_accents;
    keep_accents.strip_accents = false;
    EXPECT_EQ(bert_normalize("\xC4\xB0", keep_accents), "i\xCC\x87");  // lowercases to two characters
}

TEST(WordPiece, BertPreTokenizer) {
    std::vector<std::string> words;
    bert_pre_tokenize("hello,  world!$x", words);
    EXPECT_EQ(words, (std::vector<std::string>{"hello", ",", "world", "!", "$", "x"}));
}

TEST(WordPiece, DecoderJoinsContinuationsAndCleansUp) {
    const auto out = wordpiece_decode({"hello", "##s", "!", "it", "'", "s"}, "##", true);
    std::string text;
    for (const auto& t : out) text += t;
    EXPECT_EQ(text, "hellos! it ' s");
}

TEST(WordPiece, TokenizerJsonPipeline) {
    nlohmann::json model = {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", vocab()}};
    const nlohmann::json j = {
        {"added_tokens",
         {{{"id", 1}, {"content", "[CLS]"}, {"special", true}}, {{"id", 2}, {"content", "[SEP]"}, {"special", true}}}},
        {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
        {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
        {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}}},
        {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
        {"model", model},
    };
    auto tok = Tokenizer::from_json(j, nullptr, "test");
    const std::vector<int> ids = tok->encode("Hellos, UNAFFABLE caf\xC3\xA9!");
    EXPECT_EQ(ids, (std::vector<int>{1, 6, 8, 9, 3, 4, 5, 10, 7, 2}));
    EXPECT_EQ(tok->decode(ids, true), "hellos, unaffable cafe!");
}

}  // namespace akunu::test
