// PCRE2 wrapper, and find_all in time linear in the text.
//
// find_all matches within a window of the text in PCRE2's hard partial mode: an attempt that
// reaches the window's end stops at once and says so (PCRE2_ERROR_PARTIAL). An attempt that
// never reaches it took the path it takes on the whole text, so its result is the whole text's.
// Where one did reach it, the positions of that window are tried one at a time, anchored, each
// with a window doubled until its attempt stays inside (or the window is the whole text). So
// every attempt inspects at most about one window more than the retries before it re-scanned,
// and the re-scanned bytes are counted: past kRescanPerByte per byte of text (plus
// kRescanSlack) the text is refused. Real pre-tokenizer patterns re-scan about twice the
// length of the matches longer than a window; `a*b|a` on a run of a's re-scans the rest of
// the run for every a, and is refused after a few dozen.
#include "akunu/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>

#include "akunu/core/error.h"
#include "akunu/core/utf8.h"
#include "akunu/tokenizer/unicode.h"

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
    // Optional: PCRE2 falls back to its interpreter.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
}

Regex::~Regex() { pcre2_code_free(code_); }

namespace {

// The pattern as an error message shows it: at most 80 bytes.
std::string shown(const std::string& pattern) {
    return "regex '" + (pattern.size() <= 80 ? pattern : pattern.substr(0, 77) + "...") + "'";
}

// One find_all: the match data, the step limit and the re-scan count.
class Scan {
public:
    Scan(pcre2_code* code, const std::string& pattern, std::string_view text, size_t window)
        : code_(code),
          pattern_(pattern),
          text_(text),
          window_(window < 4 ? 4 : window),
          budget_(Regex::kRescanPerByte * text.size() + Regex::kRescanSlack),
          md_(pcre2_match_data_create_from_pattern(code, nullptr)),
          mc_(pcre2_match_context_create(nullptr)) {
        AKUNU_CHECK(md_ && mc_, "out of memory for regex match data");
    }
    ~Scan() {
        pcre2_match_data_free(md_);
        pcre2_match_context_free(mc_);
    }
    Scan(const Scan&) = delete;
    Scan& operator=(const Scan&) = delete;

    // The first match at or after `start`: true and its range, or false and the position from
    // which no match was ruled out yet (past the text's end: none is left).
    bool next(size_t start, size_t& b, size_t& e);
    size_t rescanned() const { return rescanned_; }

private:
    size_t window_end(size_t from, size_t bytes) const;
    // Matches text[0, end) from `start`; false when the attempt reached `end` before the text's.
    bool attempt(size_t start, size_t end, uint32_t options, int& rc);
    void charge(size_t from, size_t bytes);

    pcre2_code* code_;
    const std::string& pattern_;
    std::string_view text_;
    size_t window_, budget_, rescanned_ = 0;
    pcre2_match_data* md_;
    pcre2_match_context* mc_;
};

size_t Scan::window_end(size_t from, size_t bytes) const {
    if (bytes >= text_.size() - from) return text_.size();
    size_t end = from + bytes;  // moved onto a character's first byte
    while (end < text_.size() && (uint8_t(text_[end]) & 0xC0) == 0x80) ++end;
    return end;
}

bool Scan::attempt(size_t start, size_t end, uint32_t options, int& rc) {
    const bool whole = end == text_.size();
    const size_t steps = Regex::kMatchSteps + Regex::kMatchStepsPerByte * (end - start);
    pcre2_set_match_limit(mc_, uint32_t(std::min<size_t>(steps, UINT32_MAX)));
    rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text_.data()), end, start,
                     options | PCRE2_NO_UTF_CHECK | (whole ? 0 : PCRE2_PARTIAL_HARD), md_, mc_);
    if (rc == PCRE2_ERROR_MATCHLIMIT)
        throw Error(shown(pattern_) + ": a match attempt at byte " + std::to_string(start) + " of a " +
                    std::to_string(text_.size()) + "-byte text took more than " + std::to_string(steps) +
                    " backtracking steps, akunu's cap per attempt (" + std::to_string(Regex::kMatchStepsPerByte) +
                    " per byte it may see, plus " + std::to_string(Regex::kMatchSteps) + ")");
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && rc != PCRE2_ERROR_PARTIAL) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw Error(shown(pattern_) + ": match failed: " + reinterpret_cast<const char*>(message));
    }
    // A match ending at the window's end might have gone on: it counts as reaching it.
    return whole || (rc != PCRE2_ERROR_PARTIAL && (rc < 0 || pcre2_get_ovector_pointer(md_)[1] < end));
}

void Scan::charge(size_t from, size_t bytes) {
    rescanned_ += bytes;
    if (rescanned_ > budget_)
        throw Error(shown(pattern_) + ": matching re-scanned more than " + std::to_string(Regex::kRescanPerByte) +
                    " bytes per byte of a " + std::to_string(text_.size()) + "-byte text (plus " +
                    std::to_string(Regex::kRescanSlack) + "), akunu's cap: the pattern backtracks over the text " +
                    "from every position (near byte " + std::to_string(from) + "); split the text or fix the pattern");
}

bool Scan::next(size_t start, size_t& b, size_t& e) {
    const size_t end = window_end(start, window_);
    int rc = 0;
    if (!attempt(start, end, 0, rc)) {
        charge(start, end - start);
        // Some position of [start, end) reached the window's end: each in turn, anchored.
        for (size_t p = start; p < end; p += utf8_length(uint8_t(text_[p]))) {
            for (size_t w = window_;; w *= 2) {
                const size_t stop = window_end(p, w);
                if (attempt(p, stop, PCRE2_ANCHORED, rc)) break;
                charge(p, stop - p);
            }
            if (rc >= 0) break;
        }
    }
    if (rc < 0) {
        b = end == text_.size() ? end + 1 : end;
        return false;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    b = ov[0];
    e = ov[1];
    return true;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text, size_t window, size_t* rescanned) const {
    AKUNU_CHECK(is_valid_utf8(text), shown(pattern_) + ": the text is not valid UTF-8");
    std::vector<std::pair<size_t, size_t>> out;
    Scan scan(code_, pattern_, text, window);
    size_t start = 0;
    while (start <= text.size()) {
        size_t b = 0, e = 0;
        if (!scan.next(start, b, e)) {
            start = b;
            continue;
        }
        if (e > b) {
            out.emplace_back(b, e);
            start = e;
        } else {
            // An empty match: step over one UTF-8 character so the scan advances.
            if (b >= text.size()) break;
            start = b + 1;
            while (start < text.size() && (uint8_t(text[start]) & 0xC0) == 0x80) ++start;
        }
    }
    if (rescanned) *rescanned = scan.rescanned();
    return out;
}

}  // namespace akunu
