// Pipeline creation from reflected SPIR-V.
#include "akunu/vulkan/pipeline.h"

#include <cstring>

#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/vulkan/instance.h"
#include "akunu/vulkan/shader_library.h"

namespace akunu {

Pipeline::Pipeline(const cpu::CpuKernel& cpu_kernel, const std::string& kernel, const std::vector<uint32_t>& spec)
    : device_(VK_NULL_HANDLE), name_(kernel), cpu_kernel_(cpu_kernel), spec_(spec) {
    const std::string shader = cpu_kernel_.interface ? cpu_kernel_.interface : kernel;
    const SpirvModule& spirv = find_spirv(shader);
    interface_ = reflect_spirv(spirv.words, spirv.n_words, shader);
    AKUNU_CHECK(interface_.bindings.size() <= size_t(cpu::kMaxBindings) &&
                    interface_.push_constant_bytes <= uint32_t(cpu::kMaxParamBytes) &&
                    spec.size() <= size_t(cpu::kMaxSpec),
                "kernel '" + kernel + "' has more bindings, parameters or constants than the CPU backend passes");
}

Pipeline::Pipeline(Device& device, VkPipelineCache cache, const std::string& kernel, const std::vector<uint32_t>& spec)
    : device_(device.handle()), name_(kernel), spec_(spec) {
    const SpirvModule& spirv = find_spirv(kernel);
    interface_ = reflect_spirv(spirv.words, spirv.n_words, kernel);
    const DeviceProfile& p = device.profile();
    AKUNU_CHECK(interface_.push_constant_bytes <= p.max_push_constants_bytes,
                "kernel '" + kernel + "' needs " + std::to_string(interface_.push_constant_bytes) +
                    " bytes of push constants; device '" + p.name + "' allows " +
                    std::to_string(p.max_push_constants_bytes));

    // A partially built pipeline is cleaned up by the destructor of this guard on any throw.
    struct Guard {
        Pipeline* self;
        bool armed = true;
        ~Guard() {
            if (armed) self->release();
        }
    } guard{this};

    std::vector<VkDescriptorSetLayoutBinding> bindings;
    for (const auto& b : interface_.bindings)
        bindings.push_back({b.binding, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    set_info.bindingCount = uint32_t(bindings.size());
    set_info.pBindings = bindings.data();
    AKUNU_VK_CHECK(vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &set_layout_));

    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, interface_.push_constant_bytes};
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout_;
    layout_info.pushConstantRangeCount = interface_.push_constant_bytes ? 1 : 0;
    layout_info.pPushConstantRanges = &range;
    AKUNU_VK_CHECK(vkCreatePipelineLayout(device_, &layout_info, nullptr, &layout_));

    // Debian 12's validation layer does not know the cooperative-matrix-2 kernels' capabilities.
    const ValidationWaiver waiver(interface_.cooperative_matrix_khr);
    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = spirv.n_words * sizeof(uint32_t);
    module_info.pCode = spirv.words;
    VkShaderModule module;
    AKUNU_VK_CHECK(vkCreateShaderModule(device_, &module_info, nullptr, &module));

    std::vector<VkSpecializationMapEntry> entries;
    for (uint32_t i = 0; i < spec.size(); ++i) entries.push_back({i, uint32_t(i * sizeof(uint32_t)), sizeof(uint32_t)});
    VkSpecializationInfo spec_info{uint32_t(entries.size()), entries.data(), spec.size() * sizeof(uint32_t),
                                   spec.data()};

    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = spec.empty() ? nullptr : &spec_info;
    info.layout = layout_;
    captured_ = p.kernel_statistics && vkGetPipelineExecutableStatisticsKHR;
    if (captured_) info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    code_captured_ = captured_ && p.tuning.kernel_code && vkGetPipelineExecutableInternalRepresentationsKHR;
    if (code_captured_) info.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
    VkResult r = vkCreateComputePipelines(device_, cache, 1, &info, nullptr, &pipeline_);
    vkDestroyShaderModule(device_, module, nullptr);
    AKUNU_VK_CHECK(r);
    guard.armed = false;
}

Pipeline::~Pipeline() { release(); }

std::vector<KernelStatistic> Pipeline::statistics() const {
    std::vector<KernelStatistic> out;
    if (!captured_ || !pipeline_) return out;
    VkPipelineExecutableInfoKHR executable{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    executable.pipeline = pipeline_;
    executable.executableIndex = 0;  // a compute pipeline has one
    uint32_t n = 0;
    AKUNU_VK_CHECK(vkGetPipelineExecutableStatisticsKHR(device_, &executable, &n, nullptr));
    std::vector<VkPipelineExecutableStatisticKHR> stats(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    AKUNU_VK_CHECK(vkGetPipelineExecutableStatisticsKHR(device_, &executable, &n, stats.data()));
    for (uint32_t i = 0; i < n; ++i) {
        const VkPipelineExecutableStatisticKHR& s = stats[i];
        double v = 0;
        switch (s.format) {
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: v = s.value.b32 ? 1 : 0; break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: v = double(s.value.i64); break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: v = double(s.value.u64); break;
            default: v = s.value.f64; break;
        }
        out.push_back({s.name, s.description, v});
    }
    return out;
}

std::vector<KernelCode> Pipeline::code() const {
    std::vector<KernelCode> out;
    if (!code_captured_ || !pipeline_) return out;
    VkPipelineExecutableInfoKHR executable{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    executable.pipeline = pipeline_;
    uint32_t n = 0;
    AKUNU_VK_CHECK(vkGetPipelineExecutableInternalRepresentationsKHR(device_, &executable, &n, nullptr));
    std::vector<VkPipelineExecutableInternalRepresentationKHR> reps(
        n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR});
    AKUNU_VK_CHECK(vkGetPipelineExecutableInternalRepresentationsKHR(device_, &executable, &n, reps.data()));
    // The second call fills each one's data, sized by the first.
    std::vector<std::vector<char>> data(n);
    for (uint32_t i = 0; i < n; ++i) {
        data[i].resize(reps[i].dataSize);
        reps[i].pData = data[i].data();
    }
    AKUNU_VK_CHECK(vkGetPipelineExecutableInternalRepresentationsKHR(device_, &executable, &n, reps.data()));
    for (uint32_t i = 0; i < n; ++i) {
        KernelCode c{reps[i].name, reps[i].description, "", 0};
        if (reps[i].isText)
            c.text.assign(data[i].data(), strnlen(data[i].data(), data[i].size()));
        else
            c.binary_bytes = data[i].size();
        out.push_back(std::move(c));
    }
    return out;
}

void Pipeline::release() {
    if (pipeline_) vkDestroyPipeline(device_, pipeline_, nullptr);
    if (layout_) vkDestroyPipelineLayout(device_, layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    pipeline_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
    set_layout_ = VK_NULL_HANDLE;
}

}  // namespace akunu
