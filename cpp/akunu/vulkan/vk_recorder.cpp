// The Vulkan form of a CommandList's commands (vk_recorder.h).
#include "akunu/vulkan/vk_recorder.h"

#include <cmath>

#include "akunu/core/error.h"
#include "akunu/vulkan/pipeline.h"

namespace akunu {

namespace {

// Compute and transfer writes made visible to compute and transfer reads and writes.
void memory_barrier(VkCommandBuffer cb, VkAccessFlags dst_access, VkPipelineStageFlags dst_stages) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stages, 0, 1,
                         &barrier, 0, nullptr, 0, nullptr);
}

constexpr VkAccessFlags kAllAccess =
    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkPipelineStageFlags kComputeAndTransfer =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

class VulkanRecorder final : public Recorder {
public:
    VulkanRecorder(std::shared_ptr<Device> device, uint32_t max_timestamps);
    ~VulkanRecorder() override;

    void begin() override;
    void barrier() override { memory_barrier(cb_, kAllAccess, kComputeAndTransfer); }
    void dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                  size_t params_bytes, const uint32_t groups[3], const Buffer* args, size_t args_offset) override;
    void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) override {
        VkBufferCopy region{src_offset, dst_offset, bytes};
        vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
    }
    bool has_timestamps() const override { return queries_ != VK_NULL_HANDLE; }
    void timestamp(uint32_t index) override {
        vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, index);
    }
    void end() override;
    void submit() override;
    void wait(bool poll) override;
    double elapsed_ms(uint32_t from, uint32_t to) const override;

private:
    std::shared_ptr<Device> device_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    VkQueryPool queries_ = VK_NULL_HANDLE;
    uint32_t max_timestamps_ = 0;
    bool in_flight_ = false;
    std::vector<VkDescriptorBufferInfo> infos_;  // one dispatch's, reused (recording happens at load)
    std::vector<VkWriteDescriptorSet> writes_;
};

VulkanRecorder::VulkanRecorder(std::shared_ptr<Device> device, uint32_t max_timestamps) : device_(std::move(device)) {
    VkDevice vk = device_->handle();
    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool_info.queueFamilyIndex = device_->queue_family();
    AKUNU_VK_CHECK(vkCreateCommandPool(vk, &pool_info, nullptr, &pool_));
    try {
        VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        alloc.commandPool = pool_;
        alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        alloc.commandBufferCount = 1;
        AKUNU_VK_CHECK(vkAllocateCommandBuffers(vk, &alloc, &cb_));
        VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        AKUNU_VK_CHECK(vkCreateFence(vk, &fence_info, nullptr, &fence_));
        if (device_->profile().timestamps && max_timestamps > 0) {
            VkQueryPoolCreateInfo q{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
            q.queryType = VK_QUERY_TYPE_TIMESTAMP;
            q.queryCount = max_timestamps;
            AKUNU_VK_CHECK(vkCreateQueryPool(vk, &q, nullptr, &queries_));
            max_timestamps_ = max_timestamps;
        }
    } catch (...) {
        if (fence_) vkDestroyFence(vk, fence_, nullptr);
        vkDestroyCommandPool(vk, pool_, nullptr);
        throw;
    }
}

VulkanRecorder::~VulkanRecorder() {
    VkDevice vk = device_->handle();
    if (in_flight_) vkWaitForFences(vk, 1, &fence_, VK_TRUE, UINT64_MAX);
    if (queries_) vkDestroyQueryPool(vk, queries_, nullptr);
    vkDestroyFence(vk, fence_, nullptr);
    vkDestroyCommandPool(vk, pool_, nullptr);  // frees cb_
}

void VulkanRecorder::begin() {
    AKUNU_CHECK(!in_flight_, "CommandList::begin while the list is still running; call wait() first");
    AKUNU_VK_CHECK(vkResetCommandBuffer(cb_, 0));
    VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    AKUNU_VK_CHECK(vkBeginCommandBuffer(cb_, &info));
    if (queries_) vkCmdResetQueryPool(cb_, queries_, 0, max_timestamps_);
    // Work from earlier submissions (uploads, other lists) must be visible to this one.
    memory_barrier(cb_, kAllAccess, kComputeAndTransfer);
}

void VulkanRecorder::dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                              size_t params_bytes, const uint32_t groups[3], const Buffer* args, size_t args_offset) {
    const ShaderInterface& iface = pipeline.interface();
    infos_.resize(bindings.size());
    writes_.resize(bindings.size());
    for (size_t i = 0; i < bindings.size(); ++i) {
        const Binding& b = bindings[i];
        infos_[i] = {b.buffer->handle(), b.offset, b.range ? b.range : b.buffer->size() - b.offset};
        writes_[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes_[i].dstBinding = iface.bindings[i].binding;
        writes_[i].descriptorCount = 1;
        writes_[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes_[i].pBufferInfo = &infos_[i];
    }
    vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
    if (!writes_.empty())
        vkCmdPushDescriptorSetKHR(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, uint32_t(writes_.size()),
                                  writes_.data());
    if (params_bytes)
        vkCmdPushConstants(cb_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, uint32_t(params_bytes), params);
    if (args)
        vkCmdDispatchIndirect(cb_, args->handle(), args_offset);
    else
        vkCmdDispatch(cb_, groups[0], groups[1], groups[2]);
}

void VulkanRecorder::end() {
    // Make every result visible to the host, which reads mapped memory after wait().
    memory_barrier(cb_, VK_ACCESS_HOST_READ_BIT, VK_PIPELINE_STAGE_HOST_BIT);
    AKUNU_VK_CHECK(vkEndCommandBuffer(cb_));
}

void VulkanRecorder::submit() {
    AKUNU_CHECK(!in_flight_, "CommandList::submit while the previous submit is running; call wait() first");
    AKUNU_VK_CHECK(vkResetFences(device_->handle(), 1, &fence_));
    VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    info.commandBufferCount = 1;
    info.pCommandBuffers = &cb_;
    device_->submit(info, fence_);
    in_flight_ = true;
}

void VulkanRecorder::wait(bool poll) {
    if (!in_flight_) return;
    while (poll && vkGetFenceStatus(device_->handle(), fence_) == VK_NOT_READY) {}
    AKUNU_VK_CHECK(vkWaitForFences(device_->handle(), 1, &fence_, VK_TRUE, UINT64_MAX));
    in_flight_ = false;
}

double VulkanRecorder::elapsed_ms(uint32_t from, uint32_t to) const {
    if (!queries_ || in_flight_) return std::nan("");
    uint64_t t[2];
    for (int i = 0; i < 2; ++i) {
        const VkResult r = vkGetQueryPoolResults(device_->handle(), queries_, i ? to : from, 1, sizeof(uint64_t), &t[i],
                                                 sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
        if (r != VK_SUCCESS) return std::nan("");
    }
    return double(int64_t(t[1] - t[0])) * device_->profile().timestamp_period_ns * 1e-6;
}

}  // namespace

std::unique_ptr<Recorder> make_vulkan_recorder(std::shared_ptr<Device> device, uint32_t max_timestamps) {
    return std::make_unique<VulkanRecorder>(std::move(device), max_timestamps);
}

}  // namespace akunu
