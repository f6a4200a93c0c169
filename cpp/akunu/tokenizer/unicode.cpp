// Unicode support built on utf8proc.
#include "akunu/tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "akunu/core/error.h"

namespace akunu {

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

uint32_t decode_utf8_at(std::string_view s, size_t i) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
    const size_t n = utf8_length(p[0]);
    if (n == 1 || i + n > s.size()) return p[0];
    uint32_t cp = p[0] & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (p[k] & 0x3F);
    return cp;
}

std::string unicode_normalize(std::string_view s, NormalForm form) {
    int options = UTF8PROC_STABLE;
    switch (form) {
        case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
        case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
        case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            utf8proc_ssize_t(s.size()), &out, utf8proc_option_t(options));
    if (n < 0) throw Error(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
    std::string result(reinterpret_cast<char*>(out), size_t(n));
    std::free(out);
    return result;
}

std::string unicode_lowercase(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); i += utf8_length(uint8_t(s[i])))
        append_utf8(out, uint32_t(utf8proc_tolower(utf8proc_int32_t(decode_utf8_at(s, i)))));
    return out;
}

bool is_unicode_whitespace(uint32_t cp) {
    // Unicode White_Space: the categories Zs/Zl/Zp plus the C0/C1 space controls.
    if (cp == 0x09 || cp == 0x0A || cp == 0x0B || cp == 0x0C || cp == 0x0D || cp == 0x85) return true;
    const utf8proc_category_t c = utf8proc_category(utf8proc_int32_t(cp));
    return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

static std::array<int, 324> build_reverse(const std::array<std::string, 256>&);

const std::array<std::string, 256>& byte_to_unicode() {
    static const std::array<std::string, 256> table = [] {
        std::array<std::string, 256> t;
        std::vector<bool> direct(256, false);
        for (int b = '!'; b <= '~'; ++b) direct[size_t(b)] = true;
        for (int b = 0xA1; b <= 0xAC; ++b) direct[size_t(b)] = true;
        for (int b = 0xAE; b <= 0xFF; ++b) direct[size_t(b)] = true;
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) append_utf8(t[size_t(b)], direct[size_t(b)] ? uint32_t(b) : next++);
        return t;
    }();
    return table;
}

int unicode_to_byte(uint32_t cp) {
    static const std::array<int, 324> reverse = build_reverse(byte_to_unicode());
    return cp < reverse.size() ? reverse[cp] : -1;
}

static std::array<int, 324> build_reverse(const std::array<std::string, 256>& forward) {
    std::array<int, 324> r;
    r.fill(-1);
    for (int b = 0; b < 256; ++b) r[decode_utf8_at(forward[size_t(b)], 0)] = b;
    return r;
}

}  // namespace akunu
