// The SPIR-V embedded in the library: one module per row of shaders/kernels.cmake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace akunu {

struct SpirvModule {
    const char* name;  // the row's name, e.g. "gemv_f16"
    const uint32_t* words;
    size_t n_words;
};

// Throws akunu::Error listing the known kernels when `name` is not one of them.
const SpirvModule& find_spirv(const std::string& name);
// Whether this build embeds `name` (the cooperative-matrix-2 kernels are optional: kernels.cmake).
bool has_spirv(const std::string& name);
std::vector<std::string> kernel_names();

namespace generated {  // defined in the build's spirv_library_data.cpp
extern const SpirvModule kSpirvModules[];
extern const size_t kSpirvModuleCount;
}  // namespace generated

}  // namespace akunu
