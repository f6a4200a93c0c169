// UTF-8 helpers for the tokenizers: code-point iteration, Unicode normalization (utf8proc),
// case folding, and GPT-2's byte <-> printable-character map for byte-level BPE.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace akunu {

// Byte length of the UTF-8 sequence that starts with `lead` (1 for invalid lead bytes).
inline size_t utf8_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 1;
}

void append_utf8(std::string& out, uint32_t cp);
uint32_t decode_utf8_at(std::string_view s, size_t i);  // the code point at byte i (valid UTF-8)

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string unicode_normalize(std::string_view s, NormalForm form);
std::string unicode_lowercase(std::string_view s);
bool is_unicode_whitespace(uint32_t cp);

// GPT-2's bytes_to_unicode(): every byte maps to a printable code point, so byte-level BPE
// vocabularies hold only printable strings ("Ġ" is the space byte 0x20).
const std::array<std::string, 256>& byte_to_unicode();
// The byte a byte-level character stands for, or -1.
int unicode_to_byte(uint32_t cp);

}  // namespace akunu
