// The table from embedded kernel names to CPU kernels, filled once from the kernels_*.cpp files.
#include <map>
#include <string>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/core/error.h"

namespace akunu::cpu {

namespace {

std::map<std::string, CpuKernel>& table() {
    static std::map<std::string, CpuKernel> t;
    return t;
}

void add(const KernelRow& row) { table()[row.name] = row.kernel; }

const std::map<std::string, CpuKernel>& registry() {
    static const bool filled = [] {
        register_elementwise(add);
        register_matmul(add);
        register_attention(add);
        register_sample(add);
        register_encoder(add);
        register_whisper_chain(add);
        register_audio(add);
        register_tiles(add);
        register_mlx(add);
        return true;
    }();
    (void)filled;
    return table();
}

}  // namespace

bool has_kernel(const std::string& name) { return registry().count(name) != 0; }

CpuKernel find_kernel(const std::string& name) {
    const auto& t = registry();
    auto it = t.find(name);
    if (it != t.end()) return it->second;
    throw Error("kernel '" + name + "' has no CPU implementation: it is a GPU-only feature (use a Vulkan device, " +
                "device=\"vulkan\", for it)");
}

}  // namespace akunu::cpu
