// Encoding and decoding.
#include "akunu/tokenizer/tokenizer.h"

#include <algorithm>

#include "akunu/core/error.h"
#include "akunu/tokenizer/unicode.h"
#include "akunu/core/utf8.h"

namespace akunu {

Tokenizer::Tokenizer(Parts parts) : p_(std::move(parts)) {
    int max_id = -1;
    for (const auto& [tok, id] : p_.model->vocab()) max_id = std::max(max_id, id);
    for (const auto& a : p_.added) max_id = std::max(max_id, a.id);
    // Ids index dense tables: one far past the entries would cost memory out of all proportion
    // to the file (one id of 2^24 took hundreds of MB). Real vocabularies are dense.
    const size_t entries = p_.model->vocab().size() + p_.added.size();
    AKUNU_CHECK(max_id < 0 || size_t(max_id) < 2 * entries + 1024,
                p_.source + ": token id " + std::to_string(max_id) + " is far past the vocabulary's " +
                    std::to_string(entries) + " entries (ids must be below twice the entry count + 1024)");
    for (const auto* ids : {&p_.special_template.prefix, &p_.special_template.suffix})
        for (int id : *ids)
            AKUNU_CHECK(id >= 0 && id <= max_id, p_.source + ": the post-processor's token id " + std::to_string(id) +
                                                     " is outside the vocabulary (0 to " + std::to_string(max_id) +
                                                     ")");
    id_to_token_.assign(size_t(max_id + 1), std::string());
    added_index_.assign(size_t(max_id + 1), -1);
    for (const auto& [tok, id] : p_.model->vocab()) id_to_token_[size_t(id)] = tok;
    for (size_t i = 0; i < p_.added.size(); ++i) {
        id_to_token_[size_t(p_.added[i].id)] = p_.added[i].content;
        added_index_[size_t(p_.added[i].id)] = int(i);
        AKUNU_CHECK(!p_.added[i].content.empty(),
                    p_.source + ": added token " + std::to_string(p_.added[i].id) + " is empty");
    }
    // Longest first, so that at one position the longest added token wins (HF: leftmost-longest).
    std::stable_sort(p_.added.begin(), p_.added.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (size_t i = 0; i < p_.added.size(); ++i) {
        added_index_[size_t(p_.added[i].id)] = int(i);
        added_by_first_byte_[uint8_t(p_.added[i].content[0])].push_back(int(i));
    }

    auto add_stop = [&](int id) {
        if (id >= 0 && std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end()) stop_ids_.push_back(id);
    };
    add_stop(p_.eos_id);
    for (int id : p_.extra_eos_ids) add_stop(id);
    for (const char* marker : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>", "<eos>",
                               "</s>", "<|eom_id|>"}) {
        const int id = token_to_id(marker);
        if (id >= 0 && is_special(id)) add_stop(id);
    }
}

const std::string& Tokenizer::id_to_token(int id) const {
    AKUNU_CHECK(id >= 0 && size_t(id) < id_to_token_.size(), "token id " + std::to_string(id) +
                                                                 " is out of range for a vocabulary of " +
                                                                 std::to_string(id_to_token_.size()));
    return id_to_token_[size_t(id)];
}

int Tokenizer::token_to_id(std::string_view token) const {
    for (const auto& a : p_.added)
        if (a.content == token) return a.id;
    return p_.model->find(token);
}

bool Tokenizer::is_special(int id) const {
    if (id < 0 || size_t(id) >= added_index_.size() || added_index_[size_t(id)] < 0) return false;
    return p_.added[size_t(added_index_[size_t(id)])].special;
}

void Tokenizer::encode_segment(const std::string& text, bool first_segment, std::vector<int>& out) const {
    if (text.empty()) return;
    const std::string normalized = apply_normalizer(p_.normalizer, text);
    for (const std::string& word : apply_pre_tokenizer(p_.pre_tokenizer, normalized, first_segment))
        p_.model->tokenize(word, out);
}

static bool is_word_char(uint32_t cp) {
    return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_' || cp >= 0x80;
}

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special_tokens, bool parse_special) const {
    AKUNU_CHECK(p_.encode_error.empty(), p_.encode_error);
    AKUNU_CHECK(is_valid_utf8(text), "encode: the text is not valid UTF-8");
    std::vector<int> out;
    if (add_special_tokens) out.insert(out.end(), p_.special_template.prefix.begin(), p_.special_template.prefix.end());

    // Split out added tokens (leftmost, then longest) from the raw text. Tokens marked
    // `normalized` are matched the same way here: none of the supported families normalize
    // text that could change an added token's spelling.
    size_t segment_start = 0, i = 0;
    bool first_segment = true;
    const std::string s(text);
    while (i < s.size()) {
        const AddedToken* hit = nullptr;
        {
            for (int index : added_by_first_byte_[uint8_t(s[i])]) {
                const AddedToken& a = p_.added[size_t(index)];
                if (a.special && !parse_special) continue;
                if (s.compare(i, a.content.size(), a.content) != 0) continue;
                if (a.single_word) {
                    const bool before_ok = i == 0 || !is_word_char(decode_utf8_at(s, i - 1));
                    const size_t end = i + a.content.size();
                    const bool after_ok = end >= s.size() || !is_word_char(decode_utf8_at(s, end));
                    if (!before_ok || !after_ok) continue;
                }
                hit = &a;
                break;
            }
        }
        if (!hit) {
            i += utf8_length(uint8_t(s[i]));
            continue;
        }
        size_t seg_end = i, next = i + hit->content.size();
        if (hit->lstrip)
            while (seg_end > segment_start && is_unicode_whitespace(uint8_t(s[seg_end - 1]))) --seg_end;
        if (hit->rstrip)
            while (next < s.size() && is_unicode_whitespace(uint8_t(s[next]))) ++next;
        encode_segment(s.substr(segment_start, seg_end - segment_start), first_segment, out);
        out.push_back(hit->id);
        first_segment = false;
        segment_start = i = next;
    }
    encode_segment(s.substr(segment_start), first_segment, out);
    if (add_special_tokens) out.insert(out.end(), p_.special_template.suffix.begin(), p_.special_template.suffix.end());
    return out;
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool skip_special_tokens) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int id : ids) {
        const std::string& t = id_to_token(id);
        if (skip_special_tokens && is_special(id)) continue;
        tokens.push_back(t);
    }
    if (p_.decoder.empty()) {
        std::string out;
        for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
        return out;
    }
    std::string out;
    for (const auto& piece : apply_decoder(p_.decoder, std::move(tokens))) out += piece;
    return out;
}

}  // namespace akunu
