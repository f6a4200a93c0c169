// Pipeline: a compute pipeline built from an embedded kernel, with specialization constants.
//
// Its layout comes from the kernel's own SPIR-V (spirv_reflect.h): one push-descriptor set with
// the kernel's storage buffers, and a push-constant range of the kernel's block size. Devices
// own their pipelines (Device::pipeline), so a Pipeline never outlives its VkDevice.
// On the CPU backend the same kernel name resolves to a C++ kernel (vulkan/cpu_kernel.h, implemented by cpu/); the
// interface still comes from the SPIR-V, so dispatches are checked the same way.
#pragma once

#include <string>
#include <vector>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/vulkan/spirv_reflect.h"
#include "akunu/vulkan/vk_loader.h"

namespace akunu {

class Device;

// One statistic the driver reports for a compiled kernel, as a number (booleans 0 or 1).
struct KernelStatistic {
    std::string name, description;
    double value = 0;
};
// One of the driver's internal representations of a compiled kernel (its assembly, an
// intermediate form): text, or for a binary one its size.
struct KernelCode {
    std::string name, description, text;
    size_t binary_bytes = 0;  // a binary representation's size; its text stays empty
};
struct KernelStatistics {
    std::string kernel;
    std::vector<uint32_t> spec;
    std::vector<KernelStatistic> statistics;
    std::vector<KernelCode> code;  // empty unless tuning kernel_code asked for it and the driver gives it
};

class Pipeline {
public:
    // `spec[i]` becomes constant_id i (32-bit). Kernels use constant_id 0 for the workgroup size.
    Pipeline(Device& device, VkPipelineCache cache, const std::string& kernel, const std::vector<uint32_t>& spec);
    // The CPU backend's: `cpu_kernel` runs the kernel; the interface comes from its SPIR-V.
    Pipeline(const cpu::CpuKernel& cpu_kernel, const std::string& kernel, const std::vector<uint32_t>& spec);
    ~Pipeline();
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    VkPipeline handle() const { return pipeline_; }
    VkPipelineLayout layout() const { return layout_; }
    const std::string& name() const { return name_; }
    const ShaderInterface& interface() const { return interface_; }
    // CPU backend: the kernel and the specialization constants it reads.
    const cpu::CpuKernel& cpu_kernel() const { return cpu_kernel_; }
    const std::vector<uint32_t>& spec() const { return spec_; }
    // The driver's statistics of the compiled kernel (its first executable); empty unless the
    // device captures them (DeviceProfile::kernel_statistics).
    std::vector<KernelStatistic> statistics() const;
    // The driver's internal representations of it; empty unless made with tuning kernel_code.
    std::vector<KernelCode> code() const;

private:
    void release();  // destroys whatever exists; safe on a half-built pipeline

    VkDevice device_;
    bool captured_ = false;  // created with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
    bool code_captured_ = false;  // ... and VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
    std::string name_;
    ShaderInterface interface_;
    cpu::CpuKernel cpu_kernel_;
    std::vector<uint32_t> spec_;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace akunu
