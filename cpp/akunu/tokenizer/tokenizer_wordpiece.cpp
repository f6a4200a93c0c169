// WordPiece model, BertNormalizer, BertPreTokenizer and the WordPiece decoder, following
// tokenizers' models/wordpiece, normalizers/bert.rs and pre_tokenizers/bert.rs.
#include "akunu/tokenizer/tokenizer_wordpiece.h"

#include <utf8proc.h>

#include <algorithm>

#include "akunu/core/error.h"
#include "akunu/tokenizer/tokenizer_steps.h"
#include "akunu/tokenizer/unicode.h"

namespace akunu {

namespace {

utf8proc_category_t category(uint32_t cp) { return utf8proc_category(utf8proc_int32_t(cp)); }

// tokenizers' is_whitespace: tab, newline, carriage return, or Rust's char::is_whitespace.
bool is_bert_whitespace(uint32_t cp) { return is_unicode_whitespace(cp); }

// tokenizers' is_control: the "other" categories Cc, Cf, Co (and Cs, never in valid UTF-8),
// except \t \n \r. Unassigned code points (Cn) stay, as measured against tokenizers.
bool is_bert_control(uint32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    const utf8proc_category_t c = category(cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
           c == UTF8PROC_CATEGORY_CS;
}

// The CJK Unified Ideograph blocks BERT pads with spaces (Hangul and kana are not among them).
bool is_chinese_char(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) or a Unicode P* category.
bool is_bert_punctuation(uint32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
        return true;
    const utf8proc_category_t c = category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

template <class F>
void for_each_cp(const std::string& s, F f) {
    for (size_t i = 0; i < s.size(); i += utf8_length(uint8_t(s[i]))) f(decode_utf8_at(s, i));
}

}  // namespace

WordPieceModel::WordPieceModel(std::unordered_map<std::string, int> vocab, const std::string& unk_token,
                               std::string prefix, int max_input_chars_per_word, const std::string& source)
    : vocab_(std::move(vocab)), prefix_(std::move(prefix)), max_chars_(size_t(std::max(0, max_input_chars_per_word))) {
    const auto it = vocab_.find(unk_token);
    AKUNU_CHECK(it != vocab_.end(), source + ": WordPiece unk_token '" + unk_token + "' is not in the vocabulary");
    unk_id_ = it->second;
}

void WordPieceModel::tokenize(std::string_view word, std::vector<int>& out) const {
    size_t chars = 0;
    for (size_t i = 0; i < word.size(); i += utf8_length(uint8_t(word[i]))) ++chars;
    if (chars > max_chars_) {
        out.push_back(unk_id_);
        return;
    }
    const size_t first = out.size();
    std::string piece;
    for (size_t start = 0; start < word.size();) {
        // The longest piece word[start:end] in the vocabulary, shrinking by whole characters.
        size_t end = word.size();
        int id = -1;
        while (start < end) {
            piece.assign(start > 0 ? prefix_ : std::string());
            piece.append(word.substr(start, end - start));
            const auto it = vocab_.find(piece);
            if (it != vocab_.end()) {
                id = it->second;
                break;
            }
            do --end;
            while (end > start && (uint8_t(word[end]) & 0xC0) == 0x80);
        }
        if (id < 0) {  // no cover: the whole word is unknown
            out.resize(first);
            out.push_back(unk_id_);
            return;
        }
        out.push_back(id);
        start = end;
    }
}

std::string bert_normalize(const std::string& text, const BertNormalizerOptions& o) {
    std::string s;
    s.reserve(text.size());
    for_each_cp(text, [&](uint32_t cp) {
        if (o.clean_text && (cp == 0 || cp == 0xFFFD || is_bert_control(cp))) return;
        if (o.clean_text && is_bert_whitespace(cp)) cp = ' ';
        const bool pad = o.handle_chinese_chars && is_chinese_char(cp);
        if (pad) s += ' ';
        append_utf8(s, cp);
        if (pad) s += ' ';
    });
    if (o.strip_accents) {
        const std::string nfd = unicode_normalize(s, NormalForm::kNfd);
        s.clear();
        for_each_cp(nfd, [&](uint32_t cp) {
            if (category(cp) != UTF8PROC_CATEGORY_MN) append_utf8(s, cp);
        });
    }
    if (o.lowercase) {
        // Rust's char::to_lowercase, one character at a time: U+0130 (I with dot above) is the
        // one character whose lowercase is two ("i" and a combining dot above).
        std::string lower;
        lower.reserve(s.size());
        for_each_cp(s, [&](uint32_t cp) {
            if (cp == 0x130)
                lower += "i\xCC\x87";
            else
                append_utf8(lower, uint32_t(utf8proc_tolower(utf8proc_int32_t(cp))));
        });
        s = std::move(lower);
    }
    return s;
}

void bert_pre_tokenize(const std::string& text, std::vector<std::string>& words) {
    std::string word;
    auto flush = [&] {
        if (!word.empty()) words.push_back(std::move(word));
        word.clear();
    };
    for (size_t i = 0; i < text.size();) {
        const size_t n = utf8_length(uint8_t(text[i]));
        const uint32_t cp = decode_utf8_at(text, i);
        if (is_unicode_whitespace(cp)) {
            flush();
        } else if (is_bert_punctuation(cp)) {
            flush();
            words.push_back(text.substr(i, n));
        } else {
            word.append(text, i, n);
        }
        i += n;
    }
    flush();
}

std::vector<std::string> wordpiece_decode(std::vector<std::string> tokens, const std::string& prefix, bool cleanup) {
    static const std::pair<const char*, const char*> kCleanup[] = {
        {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
        std::string& t = tokens[i];
        if (i != 0) {
            if (!prefix.empty() && t.compare(0, prefix.size(), prefix) == 0)
                t.erase(0, prefix.size());
            else
                t = " " + t;
        }
        if (cleanup)
            for (const auto& [from, to] : kCleanup) t = replace_all(std::move(t), from, to);
    }
    return tokens;
}

}  // namespace akunu
