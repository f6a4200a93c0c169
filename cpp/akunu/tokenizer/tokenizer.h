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

#include "akunu/tokenizer/tokenizer_bpe.h"
#include "akunu/tokenizer/tokenizer_steps.h"
#include "akunu/tokenizer/tokenizer_wordpiece.h"

namespace akunu {

class GgufFile;
class ModelFiles;
struct ByteVocab;

struct AddedToken {
    int id;
    std::string content;
    bool special = false;  // skipped by decode(skip_special_tokens=True); split only when parsing specials
    bool normalized = false;  // matched in normalized text instead of raw text
    bool lstrip = false, rstrip = false, single_word = false;
};

class Tokenizer {
public:
    static std::shared_ptr<Tokenizer> from_json(const nlohmann::json& tokenizer, const nlohmann::json* config,
                                                const std::string& source);
    static std::shared_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
    // A model's own tokenizer: the GGUF's vocabulary, whisper.cpp GGML's embedded one, or the
    // tokenizer.json (and tokenizer_config.json) in the folder of its safetensors, CTranslate2
    // model.bin or config (tokenizer_files.cpp).
    static std::shared_ptr<Tokenizer> from_model(const ModelFiles& files);
    // A byte-level vocabulary with no merges (whisper.cpp's embedded one): it decodes; encode
    // throws, since the merge order it would need is not in the file.
    static std::shared_ptr<Tokenizer> from_byte_vocab(const ByteVocab& vocab);

    // `parse_special`: special tokens written in the text become their ids (HF's default);
    // false treats them as plain text. Throws on invalid UTF-8.
    std::vector<int> encode(std::string_view text, bool add_special_tokens = true, bool parse_special = true) const;
    // Throws when an id is out of range.
    std::string decode(const std::vector<int>& ids, bool skip_special_tokens = false) const;

    int vocab_size() const { return int(id_to_token_.size()); }
    const std::string& id_to_token(int id) const;  // throws when out of range
    int token_to_id(std::string_view token) const;  // -1 when absent
    bool is_special(int id) const;
    const std::vector<AddedToken>& added_tokens() const { return p_.added; }

    int bos_id() const { return p_.bos_id; }
    int eos_id() const { return p_.eos_id; }
    // Ids that end generation: the model's EOS ids plus the usual chat end markers the
    // vocabulary has (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>, </s>, ...).
    const std::vector<int>& stop_ids() const { return stop_ids_; }
    const std::string& chat_template() const { return p_.chat_template; }
    const std::string& source() const { return p_.source; }

    // Builders use these (tokenizer_json.cpp, tokenizer_gguf.cpp).
    struct Parts {
        std::string source;
        std::unique_ptr<SubwordModel> model;  // BPE or WordPiece
        std::vector<AddedToken> added;
        std::vector<NormalizerStep> normalizer;
        std::vector<PreTokenizerStep> pre_tokenizer;
        std::vector<DecoderStep> decoder;
        SpecialTemplate special_template;
        int bos_id = -1, eos_id = -1;
        std::vector<int> extra_eos_ids;
        std::string chat_template;
        std::string encode_error;  // non-empty: encode() throws it (a vocabulary that only decodes)
    };
    explicit Tokenizer(Parts parts);

private:
    void encode_segment(const std::string& text, bool first_segment, std::vector<int>& out) const;

    Parts p_;  // the pipeline as built; p_.added is sorted longest first
    // Derived in the constructor:
    std::vector<std::string> id_to_token_;
    std::vector<int> added_index_;  // id -> index into p_.added, or -1
    std::vector<int> added_by_first_byte_[256];  // indices into p_.added, longest first
    std::vector<int> stop_ids_;
};

}  // namespace akunu
