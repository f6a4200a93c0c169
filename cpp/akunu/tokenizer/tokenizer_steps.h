// The stages of a Hugging Face tokenizer pipeline as data: normalizer steps, pre-tokenizer
// steps, decoder steps and the special-token template. Each stage is a list of steps read
// from tokenizer.json (or built for a GGUF vocabulary) and applied in order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "akunu/tokenizer/regex.h"
#include "akunu/tokenizer/tokenizer_wordpiece.h"

namespace akunu {

struct NormalizerStep {
    enum Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kReplace, kPrepend, kStrip, kBert } kind;
    std::string pattern;  // kReplace: literal pattern (when regex is null)
    std::shared_ptr<const Regex> regex;  // kReplace with a Regex pattern
    std::string content;  // kReplace: replacement; kPrepend: prefix
    bool left = false, right = false;  // kStrip
    BertNormalizerOptions bert{};  // kBert
};
std::string apply_normalizer(const std::vector<NormalizerStep>& steps, std::string text);

// How a Split step treats the matches (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
enum class PrependScheme { kAlways, kFirst, kNever };

struct PreTokenizerStep {
    enum Kind { kSplit, kByteLevel, kMetaspace, kWhitespaceSplit, kBert } kind;
    std::shared_ptr<const Regex> regex;  // kSplit with a Regex (else `literal`)
    std::string literal;  // kSplit with a String pattern
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // kByteLevel
    bool use_regex = false;  // kByteLevel: GPT-2's regex first
    std::string replacement = "\xE2\x96\x81";  // kMetaspace: "▁"
    PrependScheme prepend = PrependScheme::kAlways;
    bool split = true;  // kMetaspace
};
// Splits one normalized segment into words. `first_segment`: the segment starts the input
// (Metaspace's "first" prepend scheme).
std::vector<std::string> apply_pre_tokenizer(const std::vector<PreTokenizerStep>& steps, const std::string& text,
                                             bool first_segment);

struct DecoderStep {
    enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kWordPiece } kind;
    std::string pattern, content;  // kReplace; kStrip: content char
    int start = 0, stop = 0;  // kStrip
    std::string replacement = "\xE2\x96\x81";  // kMetaspace
    PrependScheme prepend = PrependScheme::kAlways;
    std::string prefix = "##";  // kWordPiece: the continuation prefix
    bool cleanup = true;  // kWordPiece
};
std::vector<std::string> apply_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens);

// The post-processor's single-sequence template: ids before and after the sequence.
struct SpecialTemplate {
    std::vector<int> prefix;
    std::vector<int> suffix;
};

std::string replace_all(std::string s, const std::string& from, const std::string& to);

}  // namespace akunu
