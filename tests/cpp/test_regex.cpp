// Regex::find_all: the windowed scan finds exactly the matches of a scan over the whole text
// (real pre-tokenizer patterns, random texts, windows small enough to cut every match), its
// re-scanned bytes stay linear in the text, and a pattern that backtracks over the whole text
// from every position is refused with the cap in the message instead of taking quadratic time.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "akunu/core/error.h"
#include "akunu/tokenizer/regex.h"

namespace akunu::test {

// GPT-2's byte-level pattern, llama 3's and Qwen 2's (tokenizer_steps.cpp, tokenizer_gguf.cpp),
// and patterns with lookbehind, anchors and empty matches.
const char* const kPatterns[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    "\\p{N}",
    " ",
    "\\w+|[^\\w\\s]+",
    "(?<=a)b+",
    "a*$",
    "x*",
    "\\bab",
    "a+(?=b)|c",
    "\\s+$|^\\s+"};

// A random text over pieces that make runs of every class (letters, digits, spaces, newlines,
// punctuation, multi-byte letters and spaces).
std::string random_text(std::mt19937& rng, size_t pieces) {
    const char* const kPieces[] = {"a",  "b",  "c",  "A",    "'s", "'LL", "1",        "23",           " ",
                                   "  ", "\t", "\n", "\r\n", "!",  "?.",  "\xc3\xa9", "\xe2\x80\x83", "\xe4\xb8\xad",
                                   "x",  "_"};
    std::uniform_int_distribution<size_t> pick(0, std::size(kPieces) - 1), run(1, 12);
    std::string out;
    for (size_t i = 0; i < pieces; ++i) {
        const std::string piece = kPieces[pick(rng)];
        for (size_t r = run(rng) > 9 ? run(rng) * 6 : 1; r > 0; --r) out += piece;
    }
    return out;
}

TEST(Regex, WindowedMatchesEqualTheWholeTextScan) {
    std::mt19937 rng(7);
    for (const char* pattern : kPatterns) {
        const Regex re(pattern);
        for (int trial = 0; trial < 40; ++trial) {
            const std::string text = random_text(rng, 60);
            const auto want = re.find_all(text, text.size() + 1);  // one window: the whole text
            for (size_t window : {4, 5, 9, 32})
                ASSERT_EQ(re.find_all(text, window), want) << pattern << " window " << window << " on '" << text << "'";
        }
    }
}

TEST(Regex, RealPatternsRescanLinearlyOnLongRuns) {
    // Runs far longer than a window: each is one match (or two), re-scanned about twice.
    const std::string runs[] = {std::string(100000, ' ') + "x", std::string(1 << 21, ' ') + "x",
                                std::string(100000, 'a'), std::string(50000, '!'),
                                std::string(60000, ' ') + "\n" + std::string(60000, '\t') + "y"};
    for (const char* pattern : {kPatterns[0], kPatterns[1], kPatterns[2]}) {
        const Regex re(pattern);
        for (const std::string& text : runs) {
            size_t rescanned = 0;
            const auto got = re.find_all(text, Regex::kWindow, &rescanned);
            EXPECT_EQ(got, re.find_all(text, text.size() + 1)) << pattern;
            EXPECT_LE(rescanned, 4 * text.size() + 8 * Regex::kWindow) << pattern;
        }
    }
}

TEST(Regex, BacktrackingOverTheWholeTextIsRefusedWithTheCap) {
    // `a*b|a` tries `a*b` to the end of the run from every a: the re-scanned bytes grow with the
    // square of the run, so the cap (linear in the text) is what stops it.
    const Regex re("a*b|a");
    size_t small = 0, large = 0;
    re.find_all(std::string(400, 'a'), 4, &small);
    re.find_all(std::string(800, 'a'), 4, &large);
    EXPECT_GT(large, 3 * small);  // twice the text, four times the work (under the slack at these sizes)
    try {
        re.find_all(std::string(160000, 'a'));
        FAIL() << "expected the re-scan cap";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("re-scanned more than 32 bytes per byte of a 160000-byte text"),
                  std::string::npos)
            << e.what();
    }
    // The same pattern on a text whose run ends in b is one match, found in linear work.
    size_t rescanned = 0;
    const auto one = re.find_all(std::string(160000, 'a') + "b", Regex::kWindow, &rescanned);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].second, 160001u);
    EXPECT_LE(rescanned, 4 * 160001u);
}

TEST(Regex, CatastrophicBacktrackingHitsTheStepCap) {
    const Regex re("(a|aa)+\\d");
    try {
        re.find_all(std::string(60, 'a') + "b");
        FAIL() << "expected the step cap";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("backtracking steps, akunu's cap per attempt"), std::string::npos)
            << e.what();
    }
}

}  // namespace akunu::test
