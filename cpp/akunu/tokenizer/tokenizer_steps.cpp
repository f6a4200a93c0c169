// Normalizers, pre-tokenizers and decoders, following Hugging Face tokenizers' semantics.
#include "akunu/tokenizer/tokenizer_steps.h"

#include <cstdio>
#include <cstdlib>

#include "akunu/tokenizer/unicode.h"
#include "akunu/core/utf8.h"

namespace akunu {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
        out.append(s, pos, hit - pos);
        out += to;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Normalizers
// ---------------------------------------------------------------------------------------------

static std::string strip(const std::string& s, bool left, bool right) {
    size_t b = 0, e = s.size();
    while (left && b < e && is_unicode_whitespace(decode_utf8_at(s, b))) b += utf8_length(uint8_t(s[b]));
    while (right && e > b) {
        size_t start = e - 1;
        while (start > b && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
        if (!is_unicode_whitespace(decode_utf8_at(s, start))) break;
        e = start;
    }
    return s.substr(b, e - b);
}

std::string apply_normalizer(const std::vector<NormalizerStep>& steps, std::string text) {
    for (const auto& s : steps) {
        switch (s.kind) {
            case NormalizerStep::kNfc: text = unicode_normalize(text, NormalForm::kNfc); break;
            case NormalizerStep::kNfd: text = unicode_normalize(text, NormalForm::kNfd); break;
            case NormalizerStep::kNfkc: text = unicode_normalize(text, NormalForm::kNfkc); break;
            case NormalizerStep::kNfkd: text = unicode_normalize(text, NormalForm::kNfkd); break;
            case NormalizerStep::kLowercase: text = unicode_lowercase(text); break;
            case NormalizerStep::kPrepend:
                if (!text.empty()) text = s.content + text;  // HF prepends to non-empty text only
                break;
            case NormalizerStep::kStrip: text = strip(text, s.left, s.right); break;
            case NormalizerStep::kBert: text = bert_normalize(text, s.bert); break;
            case NormalizerStep::kReplace:
                if (!s.regex) {
                    text = replace_all(std::move(text), s.pattern, s.content);
                } else {
                    std::string out;
                    size_t pos = 0;
                    for (const auto& [b, e] : s.regex->find_all(text)) {
                        out.append(text, pos, b - pos);
                        out += s.content;
                        pos = e;
                    }
                    out.append(text, pos, std::string::npos);
                    text = std::move(out);
                }
                break;
        }
    }
    return text;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers
// ---------------------------------------------------------------------------------------------

static std::vector<std::pair<size_t, size_t>> literal_matches(const std::string& text, const std::string& literal) {
    std::vector<std::pair<size_t, size_t>> out;
    if (literal.empty()) return out;
    for (size_t pos = 0, hit; (hit = text.find(literal, pos)) != std::string::npos; pos = hit + literal.size())
        out.emplace_back(hit, hit + literal.size());
    return out;
}

// HF's NormalizedString::split: cut `text` at the matches according to `behavior`.
static void split(const std::string& text, std::vector<std::pair<size_t, size_t>> matches, SplitBehavior behavior,
                  bool invert, std::vector<std::string>& out) {
    // Segments of (begin, end, is_match), covering the text.
    struct Seg {
        size_t b, e;
        bool match;
    };
    std::vector<Seg> segs;
    size_t pos = 0;
    for (const auto& [b, e] : matches) {
        if (b > pos) segs.push_back({pos, b, false});
        segs.push_back({b, e, true});
        pos = e;
    }
    if (pos < text.size()) segs.push_back({pos, text.size(), false});
    if (invert)
        for (auto& s : segs) s.match = !s.match;

    std::vector<std::pair<size_t, size_t>> pieces;
    switch (behavior) {
        case SplitBehavior::kRemoved:
            for (const auto& s : segs)
                if (!s.match) pieces.emplace_back(s.b, s.e);
            break;
        case SplitBehavior::kIsolated:
            for (const auto& s : segs) pieces.emplace_back(s.b, s.e);
            break;
        case SplitBehavior::kContiguous:
            for (const auto& s : segs) {
                if (!pieces.empty() && s.match && segs[&s - segs.data() - 1].match)
                    pieces.back().second = s.e;
                else
                    pieces.emplace_back(s.b, s.e);
            }
            break;
        case SplitBehavior::kMergedWithPrevious:
            for (const auto& s : segs) {
                if (s.match && !pieces.empty())
                    pieces.back().second = s.e;
                else
                    pieces.emplace_back(s.b, s.e);
            }
            break;
        case SplitBehavior::kMergedWithNext: {
            bool pending = false;
            for (const auto& s : segs) {
                if (pending) {
                    pieces.back().second = s.e;
                } else {
                    pieces.emplace_back(s.b, s.e);
                }
                pending = s.match;
            }
            break;
        }
    }
    for (const auto& [b, e] : pieces)
        if (e > b) out.push_back(text.substr(b, e - b));
}

static const char* kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static std::string to_byte_level(const std::string& s) {
    const auto& table = byte_to_unicode();
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) out += table[c];
    return out;
}

std::vector<std::string> apply_pre_tokenizer(const std::vector<PreTokenizerStep>& steps, const std::string& text,
                                             bool first_segment) {
    std::vector<std::string> words{text};
    for (const auto& step : steps) {
        std::vector<std::string> next;
        for (size_t w = 0; w < words.size(); ++w) {
            const std::string& word = words[w];
            switch (step.kind) {
                case PreTokenizerStep::kSplit:
                    split(word, step.regex ? step.regex->find_all(word) : literal_matches(word, step.literal),
                          step.behavior, step.invert, next);
                    break;
                case PreTokenizerStep::kBert: bert_pre_tokenize(word, next); break;
                case PreTokenizerStep::kWhitespaceSplit: {
                    size_t i = 0;
                    while (i < word.size()) {
                        while (i < word.size() && is_unicode_whitespace(decode_utf8_at(word, i)))
                            i += utf8_length(uint8_t(word[i]));
                        size_t j = i;
                        while (j < word.size() && !is_unicode_whitespace(decode_utf8_at(word, j)))
                            j += utf8_length(uint8_t(word[j]));
                        if (j > i) next.push_back(word.substr(i, j - i));
                        i = j;
                    }
                    break;
                }
                case PreTokenizerStep::kByteLevel: {
                    std::string s = word;
                    if (step.add_prefix_space && !s.empty() && s[0] != ' ') s = " " + s;
                    if (step.use_regex) {
                        static const Regex gpt2(kGpt2Pattern);
                        std::vector<std::string> parts;
                        split(s, gpt2.find_all(s), SplitBehavior::kIsolated, false, parts);
                        for (auto& p : parts) next.push_back(to_byte_level(p));
                    } else {
                        next.push_back(to_byte_level(s));
                    }
                    break;
                }
                case PreTokenizerStep::kMetaspace: {
                    std::string s = replace_all(word, " ", step.replacement);
                    const bool prepend = step.prepend == PrependScheme::kAlways ||
                                         (step.prepend == PrependScheme::kFirst && first_segment && w == 0);
                    if (prepend && s.compare(0, step.replacement.size(), step.replacement) != 0)
                        s = step.replacement + s;
                    if (step.split)
                        split(s, literal_matches(s, step.replacement), SplitBehavior::kMergedWithNext, false, next);
                    else
                        next.push_back(s);
                    break;
                }
            }
        }
        words = std::move(next);
    }
    return words;
}

// ---------------------------------------------------------------------------------------------
// Decoders
// ---------------------------------------------------------------------------------------------

// Invalid UTF-8 becomes U+FFFD, one per maximal invalid subsequence (as Rust's from_utf8_lossy).
static std::string utf8_lossy(const std::string& bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (size_t i = 0; i < bytes.size();) {
        const uint8_t c = uint8_t(bytes[i]);
        size_t n = utf8_length(c);
        if (c >= 0x80 && n == 1) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        // Accept the longest valid prefix of this sequence.
        size_t ok = 1;
        while (ok < n && i + ok < bytes.size() && (uint8_t(bytes[i + ok]) & 0xC0) == 0x80) ++ok;
        if (ok == n && is_valid_utf8(std::string_view(bytes).substr(i, n))) {
            out.append(bytes, i, n);
            i += n;
        } else {
            out += "\xEF\xBF\xBD";
            i += std::max<size_t>(1, ok);
        }
    }
    return out;
}

static int parse_byte_token(const std::string& t) {
    if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
    char* end = nullptr;
    const long v = std::strtol(t.substr(3, 2).c_str(), &end, 16);
    return end && *end == '\0' ? int(v) : -1;
}

std::vector<std::string> apply_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens) {
    for (const auto& step : steps) {
        std::vector<std::string> next;
        switch (step.kind) {
            case DecoderStep::kByteLevel: {
                std::string bytes;
                for (const auto& t : tokens) {
                    std::string mapped;
                    bool all = true;
                    for (size_t i = 0; i < t.size() && all; i += utf8_length(uint8_t(t[i]))) {
                        const int b = unicode_to_byte(decode_utf8_at(t, i));
                        if (b < 0)
                            all = false;
                        else
                            mapped += char(b);
                    }
                    bytes += all ? mapped : t;
                }
                next.push_back(utf8_lossy(bytes));
                break;
            }
            case DecoderStep::kReplace:
                for (auto& t : tokens) next.push_back(replace_all(t, step.pattern, step.content));
                break;
            case DecoderStep::kByteFallback: {
                std::string pending;
                auto flush = [&] {
                    if (pending.empty()) return;
                    if (is_valid_utf8(pending))
                        next.push_back(pending);
                    else
                        for (size_t i = 0; i < pending.size(); ++i) next.push_back("\xEF\xBF\xBD");
                    pending.clear();
                };
                for (auto& t : tokens) {
                    const int b = parse_byte_token(t);
                    if (b >= 0) {
                        pending += char(b);
                    } else {
                        flush();
                        next.push_back(t);
                    }
                }
                flush();
                break;
            }
            case DecoderStep::kFuse: {
                std::string all;
                for (auto& t : tokens) all += t;
                next.push_back(all);
                break;
            }
            case DecoderStep::kStrip:
                for (auto& t : tokens) {
                    size_t b = 0, e = t.size();
                    for (int k = 0; k < step.start && b < e && t.compare(b, step.content.size(), step.content) == 0;
                         ++k)
                        b += step.content.size();
                    for (int k = 0; k < step.stop && e >= b + step.content.size() &&
                                    t.compare(e - step.content.size(), step.content.size(), step.content) == 0;
                         ++k)
                        e -= step.content.size();
                    next.push_back(t.substr(b, e - b));
                }
                break;
            case DecoderStep::kMetaspace:
                for (size_t i = 0; i < tokens.size(); ++i) {
                    std::string t = replace_all(tokens[i], step.replacement, " ");
                    if (i == 0 && step.prepend != PrependScheme::kNever && !t.empty() && t[0] == ' ') t.erase(0, 1);
                    next.push_back(t);
                }
                break;
            case DecoderStep::kWordPiece: next = wordpiece_decode(std::move(tokens), step.prefix, step.cleanup); break;
        }
        tokens = std::move(next);
    }
    return tokens;
}

}  // namespace akunu
