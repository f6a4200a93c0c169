// WordPiece, the BERT tokenizer, as Hugging Face tokenizers applies it.
//
// The pipeline around the model: BertNormalizer (drop control characters and turn whitespace
// into spaces, pad CJK ideographs with spaces, strip accents, lowercase), BertPreTokenizer
// (split on whitespace, isolate punctuation), then WordPiece: each word becomes the longest
// vocabulary prefix, then "##"-continuations of the rest, greedily left to right; a word with
// no such cover, or longer than max_input_chars_per_word characters, is one [UNK]. The
// template adds [CLS] ... [SEP]; decoding joins "##" pieces and cleans up spaces before
// punctuation.
#pragma once

#include <string>
#include <vector>

#include "akunu/tokenizer/tokenizer_model.h"

namespace akunu {

class WordPieceModel : public SubwordModel {
public:
    // Throws (naming `source`) when the unknown token is not in the vocabulary.
    WordPieceModel(std::unordered_map<std::string, int> vocab, const std::string& unk_token, std::string prefix,
                   int max_input_chars_per_word, const std::string& source);
    void tokenize(std::string_view word, std::vector<int>& out) const override;
    const std::unordered_map<std::string, int>& vocab() const override { return vocab_; }

private:
    std::unordered_map<std::string, int> vocab_;
    int unk_id_;
    std::string prefix_;  // "##"
    size_t max_chars_;
};

// The BertNormalizer's switches (tokenizer.json "BertNormalizer"; strip_accents null there
// follows lowercase).
struct BertNormalizerOptions {
    bool clean_text = true;
    bool handle_chinese_chars = true;
    bool strip_accents = true;
    bool lowercase = true;
};
std::string bert_normalize(const std::string& text, const BertNormalizerOptions& o);

// BertPreTokenizer: whitespace removed, each punctuation character its own word.
void bert_pre_tokenize(const std::string& text, std::vector<std::string>& words);

// The WordPiece decoder: "##" continuations join the previous token, others get a space;
// with `cleanup`, spaces before punctuation and contractions go (" ." -> ".", " n't" -> "n't").
std::vector<std::string> wordpiece_decode(std::vector<std::string> tokens, const std::string& prefix, bool cleanup);

}  // namespace akunu
