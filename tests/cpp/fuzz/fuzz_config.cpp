// libFuzzer target: config.json text through parsing, derive(), the memory plan and RoPE.
#include <nlohmann/json.hpp>

#include "akunu/core/error.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    try {
        const akunu::ModelConfig c = akunu::config_from_json(j, "fuzz");
        akunu::fuzz::exercise_config(c, nullptr);
    } catch (const akunu::Error&) {}
    return 0;
}
