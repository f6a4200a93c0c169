// Lookup in the generated table of embedded SPIR-V modules.
#include "akunu/vulkan/shader_library.h"

#include <cstring>

#include "akunu/core/error.h"

namespace akunu {

const SpirvModule& find_spirv(const std::string& name) {
    for (size_t i = 0; i < generated::kSpirvModuleCount; ++i)
        if (name == generated::kSpirvModules[i].name) return generated::kSpirvModules[i];
    std::string known;
    for (const auto& n : kernel_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("no kernel named '" + name + "'; the embedded kernels are: " + known);
}

bool has_spirv(const std::string& name) {
    for (size_t i = 0; i < generated::kSpirvModuleCount; ++i)
        if (name == generated::kSpirvModules[i].name) return true;
    return false;
}

std::vector<std::string> kernel_names() {
    std::vector<std::string> names;
    for (size_t i = 0; i < generated::kSpirvModuleCount; ++i) names.emplace_back(generated::kSpirvModules[i].name);
    return names;
}

}  // namespace akunu
