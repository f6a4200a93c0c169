// The Vulkan logical device: creation, queues, submission. Device selection and the members that
// differ by backend are in backend/devices.cpp.
#include "akunu/vulkan/device.h"

#include <algorithm>

#include "akunu/vulkan/buffer.h"
#include "akunu/core/error.h"
#include "akunu/core/tuning.h"
#include "akunu/vulkan/pipeline.h"
#include "akunu/vulkan/vk_memory.h"
#include "akunu/vulkan/vk_recorder.h"
#include "akunu/vulkan/vk_coopmat2.h"

namespace akunu {

// ---------------------------------------------------------------------------------------------
// Logical device
// ---------------------------------------------------------------------------------------------

Device::Device(std::shared_ptr<Instance> instance, VkPhysicalDevice physical, const Tuning& tuning)
    : instance_(std::move(instance)), physical_(physical), profile_(query_device_profile(physical, tuning)) {
    AKUNU_CHECK(profile_.push_descriptors,
                "device '" + profile_.name + "' lacks VK_KHR_push_descriptor, which akunu uses to bind buffers");
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

    // The compute queue: prefer a compute-only family (async compute), then any with compute.
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, families.data());
    int best = -1;
    for (uint32_t i = 0; i < n; ++i) {
        if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        const bool graphics = families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT;
        if (best < 0 || (!graphics && (families[best].queueFlags & VK_QUEUE_GRAPHICS_BIT))) best = int(i);
    }
    AKUNU_CHECK(best >= 0, "device '" + profile_.name + "' has no compute queue");
    queue_family_ = uint32_t(best);

    // Enable every feature the device has, except robust buffer access, which costs bandwidth
    // and which correct kernels do not need.
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    f11.pNext = &f12;
    const bool v13 = profile_.api_version >= VK_API_VERSION_1_3 && instance_->api_version() >= VK_API_VERSION_1_3;
    if (v13) f12.pNext = &f13;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(physical_, &features);
    features.features.robustBufferAccess = VK_FALSE;
    f12.bufferDeviceAddressCaptureReplay = VK_FALSE;
    f12.bufferDeviceAddressMultiDevice = VK_FALSE;
    f13.robustImageAccess = VK_FALSE;

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue_info.queueFamilyIndex = queue_family_;
    queue_info.queueCount = 1;
    queue_info.pQueuePriorities = &priority;

    std::vector<const char*> extensions = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    if (profile_.gemm_coopmat) {
        coopmat.cooperativeMatrix = VK_TRUE;
        coopmat.pNext = features.pNext;
        features.pNext = &coopmat;
        extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    }
    vk::CooperativeMatrixFeaturesKHR coopmat_khr;
    vk::CooperativeMatrix2FeaturesNV coopmat2;
    if (profile_.gemm_coopmat2) {
        coopmat_khr.cooperativeMatrix = VK_TRUE;
        coopmat2.cooperativeMatrixWorkgroupScope = VK_TRUE;
        coopmat2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
        coopmat2.cooperativeMatrixTensorAddressing = VK_TRUE;
        coopmat2.pNext = &coopmat_khr;
        coopmat_khr.pNext = features.pNext;
        features.pNext = &coopmat2;
        extensions.push_back(vk::kKhrCooperativeMatrix);
        extensions.push_back(vk::kNvCooperativeMatrix2);
    }
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executables{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    if (profile_.kernel_statistics) {
        executables.pipelineExecutableInfo = VK_TRUE;
        executables.pNext = features.pNext;
        features.pNext = &executables;
        extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    }
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    info.pNext = &features;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue_info;
    info.enabledExtensionCount = uint32_t(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    {
        // Debian 12's validation layer (1.3.239) predates VK_KHR_cooperative_matrix and
        // VK_NV_cooperative_matrix2: it reports their feature structs as unknown and warns that
        // it cannot check the extensions. Those messages say nothing about our calls, so they
        // are dropped while this one device is created with them, and only then.
        const ValidationWaiver waiver(profile_.gemm_coopmat2);
        AKUNU_VK_CHECK(vkCreateDevice(physical_, &info, nullptr, &device_));
    }
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool_info.queueFamilyIndex = queue_family_;
    AKUNU_VK_CHECK(vkCreateCommandPool(device_, &pool_info, nullptr, &once_pool_));
    VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    AKUNU_VK_CHECK(vkCreateFence(device_, &fence_info, nullptr, &once_fence_));
    VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    AKUNU_VK_CHECK(vkCreatePipelineCache(device_, &cache_info, nullptr, &pipeline_cache_));
}

Device::~Device() {
    if (is_cpu()) {
        pipelines_.clear();
        return;
    }
    vkDeviceWaitIdle(device_);
    free_staging();
    pipelines_.clear();
    vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
    vkDestroyFence(device_, once_fence_, nullptr);
    vkDestroyCommandPool(device_, once_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
}

Buffer Device::allocate(size_t bytes) { return Buffer::allocate(shared_from_this(), bytes); }

Buffer Device::allocate(const void* data, size_t bytes) { return Buffer::allocate(shared_from_this(), data, bytes); }

const Pipeline& Device::pipeline(const std::string& kernel, const std::vector<uint32_t>& spec) {
    std::string key = kernel;
    for (uint32_t v : spec) key += ":" + std::to_string(v);
    std::lock_guard<std::mutex> lock(pipelines_mutex_);
    auto it = pipelines_.find(key);
    if (it == pipelines_.end()) it = pipelines_.emplace(key, make_pipeline(kernel, spec)).first;
    return *it->second;
}

std::vector<KernelStatistics> Device::kernel_statistics() const {
    std::vector<KernelStatistics> out;
    if (is_cpu() || !profile_.kernel_statistics) return out;
    std::lock_guard<std::mutex> lock(pipelines_mutex_);
    for (const auto& [key, pipeline] : pipelines_)
        out.push_back({pipeline->name(), pipeline->spec(), pipeline->statistics(), pipeline->code()});
    return out;
}

void Device::run_once(const std::function<void(VkCommandBuffer)>& record) {
    AKUNU_CHECK(!is_cpu(), "Device::run_once records Vulkan commands; the CPU backend has none");
    std::lock_guard<std::mutex> lock(once_mutex_);
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = once_pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cb;
    AKUNU_VK_CHECK(vkAllocateCommandBuffers(device_, &alloc, &cb));
    struct Release {  // the command buffer goes back to the pool however we leave
        VkDevice d;
        VkCommandPool p;
        VkCommandBuffer c;
        ~Release() { vkFreeCommandBuffers(d, p, 1, &c); }
    } release{device_, once_pool_, cb};

    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    AKUNU_VK_CHECK(vkBeginCommandBuffer(cb, &begin));
    record(cb);
    AKUNU_VK_CHECK(vkEndCommandBuffer(cb));

    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cb;
    AKUNU_VK_CHECK(vkResetFences(device_, 1, &once_fence_));
    this->submit(submit, once_fence_);
    AKUNU_VK_CHECK(vkWaitForFences(device_, 1, &once_fence_, VK_TRUE, UINT64_MAX));
}

void Device::submit(const VkSubmitInfo& info, VkFence fence) {
    AKUNU_CHECK(!is_cpu(), "Device::submit takes Vulkan work; the CPU backend has none");
    std::lock_guard<std::mutex> lock(queue_mutex_);
    AKUNU_VK_CHECK(vkQueueSubmit(queue_, 1, &info, fence));
}

}  // namespace akunu
