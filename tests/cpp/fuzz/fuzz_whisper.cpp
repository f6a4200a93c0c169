// libFuzzer target: the Whisper file readers (CTranslate2 model.bin, whisper.cpp GGML), the
// presentation under HF names, then every tensor they accept is read in full.
#include "akunu/core/error.h"
#include "akunu/formats/ct2_file.h"
#include "akunu/formats/ggml_whisper.h"
#include "akunu/formats/whisper_files.h"
#include "exercise.h"

namespace {

void read_all(const std::vector<akunu::TensorInfo>& tensors) {
    std::vector<float> out;
    for (const auto& t : tensors) {
        if (!t.type->dequant || t.n_elements > (1u << 20)) continue;
        out.resize(size_t(t.n_elements));
        akunu::dequantize(*t.type, t.data, out.data(), t.n_elements, t.name);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto file = akunu::MappedFile::from_bytes(data, size, "fuzz.bin");
    try {
        if (akunu::GgmlWhisperFile::looks_like(*file)) {
            read_all(akunu::GgmlWhisperFile::open(file)->tensors());
            read_all(akunu::read_ggml_whisper(file).tensors);
        } else {
            read_all(akunu::Ct2File::open(file)->variables());
        }
    } catch (const akunu::Error&) {}
    return 0;
}
