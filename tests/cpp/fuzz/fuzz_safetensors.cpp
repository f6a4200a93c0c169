// libFuzzer target: the safetensors parser, then every tensor it accepts is read in full.
#include "akunu/core/error.h"
#include "akunu/formats/safetensors.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto st = akunu::SafetensorsFile::open(akunu::MappedFile::from_bytes(data, size, "fuzz.safetensors"));
        std::vector<float> out;
        for (const auto& t : st->tensors()) {
            if (t.n_elements > (1u << 20)) continue;
            out.resize(size_t(t.n_elements));
            akunu::dequantize(*t.type, t.data, out.data(), t.n_elements, t.name);
        }
    } catch (const akunu::Error&) {}
    return 0;
}
