// Regex: a compiled PCRE2 pattern in UTF + UCP mode (Unicode classes such as \p{L}, and \s
// matching Unicode white space), JIT-compiled, as the tokenizers' pre-tokenizers need.
//
// find_all costs time linear in the text for any pattern, or refuses the text with an error
// that states the cap (regex.cpp says how): a backtracking matcher may otherwise scan to the
// end of the text from every start position (`a*b|a` on a run of a's is quadratic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace akunu {

class Regex {
public:
    // Bytes of text one match attempt sees before it is retried with twice as many.
    static constexpr size_t kWindow = 256;
    // Bytes that retried attempts may re-scan: this many per byte of text, plus kRescanSlack.
    static constexpr size_t kRescanPerByte = 32;
    static constexpr size_t kRescanSlack = size_t(1) << 20;
    // PCRE2's backtracking steps for one match attempt: this many per byte it may see, plus
    // kMatchSteps.
    static constexpr size_t kMatchStepsPerByte = 16;
    static constexpr size_t kMatchSteps = 1000000;

    // Throws akunu::Error with PCRE2's message and offset when `pattern` does not compile.
    explicit Regex(const std::string& pattern);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Every non-overlapping match in `text` (valid UTF-8), as [begin, end) byte ranges: the
    // matches PCRE2 finds scanning the whole text. Throws akunu::Error when the re-scanned bytes
    // pass the cap above. `window` (tests: small windows exercise the retries) and `rescanned`
    // (the bytes re-scanned, a work counter) are for tests.
    std::vector<std::pair<size_t, size_t>> find_all(std::string_view text, size_t window = kWindow,
                                                    size_t* rescanned = nullptr) const;
    const std::string& pattern() const { return pattern_; }

private:
    std::string pattern_;
    pcre2_real_code_8* code_ = nullptr;
};

}  // namespace akunu
