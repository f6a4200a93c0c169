// PCRE2 wrapper.
#include "akunu/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "akunu/core/error.h"

namespace akunu {

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (!code_) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        throw Error("regex '" + pattern + "' does not compile at offset " + std::to_string(offset) + ": " +
                    reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
}

Regex::~Regex() { pcre2_code_free(code_); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    AKUNU_CHECK(md, "out of memory for regex match data");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t start = 0;
    uint32_t options = 0;
    while (start <= text.size()) {
        const int rc = pcre2_match(code_, subject, text.size(), start, options, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(md);
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            throw Error("regex match failed: " + std::string(reinterpret_cast<const char*>(message)));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t b = ov[0], e = ov[1];
        if (e > b) {
            out.emplace_back(b, e);
            start = e;
        } else {
            // An empty match: step over one UTF-8 character so the scan advances.
            if (b >= text.size()) break;
            start = b + 1;
            while (start < text.size() && (uint8_t(text[start]) & 0xC0) == 0x80) ++start;
        }
        options = PCRE2_NO_UTF_CHECK;  // checked once on the first call
    }
    pcre2_match_data_free(md);
    return out;
}

}  // namespace akunu
