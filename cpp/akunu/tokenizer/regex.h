// Regex: a compiled PCRE2 pattern in UTF + UCP mode (Unicode classes such as \p{L}, and \s
// matching Unicode white space), JIT-compiled, as the tokenizers' pre-tokenizers need.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace akunu {

class Regex {
public:
    // Throws akunu::Error with PCRE2's message and offset when `pattern` does not compile.
    explicit Regex(const std::string& pattern);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Every non-overlapping match in `text` (valid UTF-8), as [begin, end) byte ranges.
    std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
    const std::string& pattern() const { return pattern_; }

private:
    std::string pattern_;
    pcre2_real_code_8* code_ = nullptr;
};

}  // namespace akunu
