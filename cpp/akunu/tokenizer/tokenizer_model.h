// SubwordModel: the model stage of a tokenizer pipeline, which turns one pre-tokenized word
// into ids. BPE (tokenizer_bpe.h) and WordPiece (tokenizer_wordpiece.h) implement it; the rest
// of the pipeline (added tokens, normalizer, pre-tokenizer, template, decoder) is shared.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace akunu {

class SubwordModel {
public:
    virtual ~SubwordModel() = default;
    // Appends the ids of `word` to `out`.
    virtual void tokenize(std::string_view word, std::vector<int>& out) const = 0;
    virtual const std::unordered_map<std::string, int>& vocab() const = 0;
    int find(std::string_view token) const {  // -1 when absent
        const auto it = vocab().find(std::string(token));
        return it == vocab().end() ? -1 : it->second;
    }
};

}  // namespace akunu
