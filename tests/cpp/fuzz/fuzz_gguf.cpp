// libFuzzer target: GGUF bytes through the whole model-file path (open, metadata, tensors,
// dequantize, config, validation, plan).
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "akunu/core/error.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // ModelFiles opens paths: give it an in-memory file.
    static const int fd = memfd_create("fuzz.gguf", 0);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size)) return 0;
    try {
        auto files = akunu::ModelFiles::open("/proc/self/fd/" + std::to_string(fd));
        akunu::fuzz::exercise_model(*files);
    } catch (const akunu::Error&) {}
    return 0;
}
