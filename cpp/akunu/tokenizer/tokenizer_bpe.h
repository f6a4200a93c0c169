// BpeModel: byte-pair encoding by merge rank, as Hugging Face tokenizers' BPE model applies it.
//
// A word starts as its characters (each looked up in the vocabulary, with byte fallback to
// "<0xXX>" tokens or the unknown token), then the adjacent pair with the lowest merge rank is
// merged until none is left. A min-heap over (rank, position) with a linked list of symbols
// makes this O(n log n) per word, with no rescans.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "akunu/tokenizer/tokenizer_model.h"

namespace akunu {

struct BpeOptions {
    bool byte_fallback = false;  // unknown characters become their UTF-8 bytes as <0xXX> tokens
    bool ignore_merges = false;  // a word that is itself in the vocabulary is one token (llama3)
    bool fuse_unk = false;  // consecutive unknowns become one
    int unk_id = -1;  // -1: unknown characters are dropped (HF does the same)
    std::string continuing_subword_prefix;
    std::string end_of_word_suffix;
};

class BpeModel : public SubwordModel {
public:
    BpeModel(std::unordered_map<std::string, int> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
             BpeOptions options, const std::string& source);

    // Appends the ids of `word` to `out`.
    void tokenize(std::string_view word, std::vector<int>& out) const override;

    const std::unordered_map<std::string, int>& vocab() const override { return vocab_; }
    size_t merge_count() const { return merges_.size(); }

private:
    struct Merge {
        int rank;
        int result;
    };
    static uint64_t key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    void tokenize_uncached(std::string_view word, std::vector<int>& out) const;

    std::unordered_map<std::string, int> vocab_;
    std::unordered_map<uint64_t, Merge> merges_;
    BpeOptions options_;
    int byte_ids_[256];  // <0xXX> token ids, -1 when absent

    // Words repeat a lot in real text; results are cached (bounded, cleared when full).
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace akunu
