// Tokenizer: text <-> token ids, identical to Hugging Face tokenizers.
//
// The pipeline is HF's: added (special) tokens are split out first, the rest is normalized,
// pre-tokenized into words, and each word is encoded by the BPE model; the post-processor's
// template adds BOS/EOS. Decoding maps ids back to tokens and runs the decoder steps. It is
// built from tokenizer.json (tokenizer_json.cpp) or from GGUF metadata (tokenizer_gguf.cpp).
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "akunu/tokenizer_bpe.h"
#include "akunu/tokenizer_steps.h"

namespace akunu {

class GgufFile;

struct AddedToken {
    int id;
    std::string content;
    bool special = false;     // skipped by decode(skip_special_tokens=True); split only when parsing specials
    bool normalized = false;  // matched in normalized text instead of raw text
    bool lstrip = false, rstrip = false, single_word = false;
};

class Tokenizer {
public:
    static std::shared_ptr<Tokenizer> from_json(const nlohmann::json& tokenizer, const nlohmann::json* config,
                                                const std::string& source);
    static std::shared_ptr<Tokenizer> from_gguf(const GgufFile& gguf);

    // `parse_special`: special tokens written in the text become their ids (HF's default);
    // false treats them as plain text. Throws on invalid UTF-8.
    std::vector<int> encode(std::string_view text, bool add_special_tokens = true, bool parse_special = true) const;
    // Throws when an id is out of range.
    std::string decode(const std::vector<int>& ids, bool skip_special_tokens = false) const;

    int vocab_size() const { return int(id_to_token_.size()); }
    const std::string& id_to_token(int id) const;  // throws when out of range
    int token_to_id(std::string_view token) const;  // -1 when absent
    bool is_special(int id) const;
    const std::vector<AddedToken>& added_tokens() const { return added_; }

    int bos_id() const { return bos_id_; }
    int eos_id() const { return eos_id_; }
    // Ids that end generation: the model's EOS ids plus the usual chat end markers the
    // vocabulary has (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>, </s>, ...).
    const std::vector<int>& stop_ids() const { return stop_ids_; }
    const std::string& chat_template() const { return chat_template_; }
    const std::string& source() const { return source_; }

    // Builders use these (tokenizer_json.cpp, tokenizer_gguf.cpp).
    struct Parts {
        std::string source;
        std::unique_ptr<BpeModel> model;
        std::vector<AddedToken> added;
        std::vector<NormalizerStep> normalizer;
        std::vector<PreTokenizerStep> pre_tokenizer;
        std::vector<DecoderStep> decoder;
        SpecialTemplate special_template;
        int bos_id = -1, eos_id = -1;
        std::vector<int> extra_eos_ids;
        std::string chat_template;
    };
    explicit Tokenizer(Parts parts);

private:
    void encode_segment(const std::string& text, bool first_segment, std::vector<int>& out) const;

    std::string source_;
    std::unique_ptr<BpeModel> model_;
    std::vector<AddedToken> added_;
    std::vector<NormalizerStep> normalizer_;
    std::vector<PreTokenizerStep> pre_tokenizer_;
    std::vector<DecoderStep> decoder_;
    SpecialTemplate template_;
    std::vector<std::string> id_to_token_;
    std::vector<int> added_index_;  // id -> index into added_, or -1
    int bos_id_ = -1, eos_id_ = -1;
    std::vector<int> stop_ids_;
    std::string chat_template_;
    std::vector<int> added_by_first_byte_[256];  // indices into added_, longest first
};

}  // namespace akunu
