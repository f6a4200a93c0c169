// Tokenizer::from_byte_vocab: a decoder for a vocabulary of raw byte strings (whisper.cpp's
// GGML files embed GPT-2's tokens so, without merges), plus the special tokens named beside it.
#include "akunu/core/error.h"
#include "akunu/formats/whisper_files.h"
#include "akunu/tokenizer/tokenizer.h"
#include "akunu/tokenizer/unicode.h"

namespace akunu {

std::shared_ptr<Tokenizer> Tokenizer::from_byte_vocab(const ByteVocab& v) {
    Parts p;
    p.source = v.source;
    const auto& table = byte_to_unicode();
    std::unordered_map<std::string, int> vocab;
    vocab.reserve(v.tokens.size());
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        std::string token;
        for (unsigned char c : v.tokens[id]) token += table[c];
        vocab.emplace(std::move(token), int(id));
    }
    for (const auto& [id, content] : v.specials) {
        AddedToken a;
        a.id = id;
        a.content = content;
        a.special = true;
        p.added.push_back(a);
    }
    p.model = std::make_unique<BpeModel>(std::move(vocab), std::vector<std::pair<std::string, std::string>>{},
                                         BpeOptions{}, v.source);
    PreTokenizerStep byte_level{PreTokenizerStep::kByteLevel};
    byte_level.use_regex = true;
    p.pre_tokenizer.push_back(byte_level);
    p.decoder.push_back({DecoderStep::kByteLevel});
    p.eos_id = v.eos_id;
    p.encode_error = v.source +
                     ": this vocabulary (whisper.cpp's, without BPE merges) only decodes; encode text with the "
                     "model's tokenizer.json";
    return std::make_shared<Tokenizer>(std::move(p));
}

}  // namespace akunu
