// libFuzzer target: tokenizer.json text through the bounded JSON parser, Tokenizer::from_json,
// and an encode/decode round of a fixed text. Seeds: tests/cpp/fuzz/corpus/tokenizer/.
#include <string_view>

#include "akunu/core/error.h"
#include "akunu/formats/json_file.h"
#include "akunu/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const nlohmann::json j = akunu::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
        const auto tok = akunu::Tokenizer::from_json(j, nullptr, "fuzz");
        const std::vector<int> ids = tok->encode("Hello wörld 123 ab\n\t<s>", true, true);
        tok->decode(ids, false);
        tok->decode(ids, true);
    } catch (const akunu::Error&) {}
    return 0;
}
