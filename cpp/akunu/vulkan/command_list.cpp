// Recording, hazard tracking, submission and timestamps for CommandList.
#include "akunu/vulkan/command_list.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "akunu/core/error.h"

namespace akunu {

CommandList::CommandList(std::shared_ptr<Device> device, uint32_t max_timestamps) : device_(std::move(device)) {
    const char* windows = std::getenv("AKUNU_ROW_WINDOW_BARRIERS");
    windows_ignored_ = windows && std::string(windows) == "1";
    const char* columns = std::getenv("AKUNU_COLUMN_BARRIERS");
    columns_ignored_ = columns && std::string(columns) == "1";
    if (device_->is_cpu()) {  // no Vulkan objects; commands are kept in cpu_commands_
        cpu_times_.assign(max_timestamps, 0);
        max_timestamps_ = max_timestamps;
        return;
    }
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

CommandList::~CommandList() {
    if (device_->is_cpu()) return;
    VkDevice vk = device_->handle();
    if (in_flight_) vkWaitForFences(vk, 1, &fence_, VK_TRUE, UINT64_MAX);
    if (queries_) vkDestroyQueryPool(vk, queries_, nullptr);
    vkDestroyFence(vk, fence_, nullptr);
    vkDestroyCommandPool(vk, pool_, nullptr);  // frees cb_
}

void CommandList::hold(const Buffer& b) {
    // Engine buffers have no owner; a Python buffer's is taken once per recording (a few
    // dispatches), not per token.
    if (std::shared_ptr<const void> o = b.owner()) {
        for (const auto& h : owners_)
            if (h == o) return;
        owners_.push_back(std::move(o));
    }
}

void CommandList::begin() {
    AKUNU_CHECK(!in_flight_, "CommandList::begin while the list is still running; call wait() first");
    if (!device_->is_cpu()) {
        AKUNU_VK_CHECK(vkResetCommandBuffer(cb_, 0));
        VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        AKUNU_VK_CHECK(vkBeginCommandBuffer(cb_, &info));
    }
    recording_ = true;
    ended_ = false;
    dispatches_ = barriers_ = 0;
    timestamps_used_ = 0;
    read_since_barrier_.clear();
    written_since_barrier_.clear();
    last_writes_ = 0;
    owners_.clear();
    cpu_commands_.clear();
    if (device_->is_cpu()) return;
    if (queries_) vkCmdResetQueryPool(cb_, queries_, 0, max_timestamps_);
    // Work from earlier submissions (uploads, other lists) must be visible to this one.
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                            VK_ACCESS_TRANSFER_WRITE_BIT;
    vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                         nullptr, 0, nullptr);
}

// Column views of one buffer with the same row stride whose columns do not meet: Q, K and V of
// a chunk, each GEMM writing its columns of every [q | k | v] row.
template <class R>
static bool columns_apart(const R& a, const R& b) {
    if (!a.stride || a.stride != b.stride) return false;
    const size_t ca = a.begin % a.stride, cb = b.begin % b.stride;
    return ca + a.width <= cb || cb + b.width <= ca;
}

// Two bindings conflict only where their bytes overlap, and only if their commands can both
// run: Q, K and V written into separate columns of one qkv buffer need no barrier between
// them, nor do the GEMMs for short and for long chunks that write the same rows.
// `count` limits the search to the set's first entries.
template <class R>
static bool overlaps(const std::vector<R>& set, const R& r, size_t count = SIZE_MAX) {
    auto upper = [](uint32_t max_rows) { return max_rows ? max_rows : UINT32_MAX; };
    for (size_t i = 0; i < std::min(count, set.size()); ++i) {
        const R& s = set[i];
        const bool both_run = std::max(s.min_rows, r.min_rows) < std::min(upper(s.max_rows), upper(r.max_rows));
        if (s.buffer == r.buffer && s.begin < r.end && r.begin < s.end && both_run && !columns_apart(s, r)) return true;
    }
    return false;
}

void CommandList::record_barrier() {
    if (device_->is_cpu()) {  // commands run one after another: nothing to record, only count
        read_since_barrier_.clear();
        written_since_barrier_.clear();
        last_writes_ = 0;
        ++barriers_;
        return;
    }
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                            VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(cb_, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
    read_since_barrier_.clear();
    written_since_barrier_.clear();
    last_writes_ = 0;
    ++barriers_;
}

void CommandList::barrier_if_needed(const std::vector<Range>& reads, const std::vector<Range>& writes,
                                    bool awaits_previous) {
    // A command that waits for the previous one itself conflicts only with what came before that.
    const size_t written = written_since_barrier_.size() - (awaits_previous ? last_writes_ : 0);
    bool hazard = false;
    for (const Range& r : reads) hazard = hazard || overlaps(written_since_barrier_, r, written);             // RAW
    for (const Range& w : writes)
        hazard = hazard || overlaps(written_since_barrier_, w, written) || overlaps(read_since_barrier_, w);  // WAW, WAR
    if (hazard) record_barrier();
    read_since_barrier_.insert(read_since_barrier_.end(), reads.begin(), reads.end());
    written_since_barrier_.insert(written_since_barrier_.end(), writes.begin(), writes.end());
    last_writes_ = writes.size();
}

void CommandList::dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                           size_t params_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    const uint32_t groups[3] = {gx, gy, gz};
    record_dispatch(pipeline, bindings, params, params_bytes, groups, nullptr, 0, false);
}

void CommandList::dispatch_indirect(const DispatchCmd& cmd, const Buffer& args, size_t offset) {
    AKUNU_CHECK(&args.device() == device_.get() && offset % 4 == 0 && offset + sizeof(VkDispatchIndirectCommand) <= args.size(),
                "CommandList::dispatch_indirect: the counts are not a VkDispatchIndirectCommand inside a buffer of this device");
    hold(args);
    // Only a chunk's counts follow its row window (DispatchTable::set_tokens zeroes them outside).
    record_dispatch(*cmd.pipeline, cmd.bindings, cmd.params.data(), cmd.params.size(), cmd.groups, &args, offset,
                    cmd.awaits_previous, cmd.chunk.follows() ? &cmd.chunk : nullptr);
}

void CommandList::record_dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                                  size_t params_bytes, const uint32_t groups[3], const Buffer* args, size_t args_offset,
                                  bool awaits_previous, const ChunkRows* window) {
    const uint32_t gx = groups[0], gy = groups[1], gz = groups[2];
    AKUNU_CHECK(recording_, "CommandList::dispatch outside begin()/end()");
    const ShaderInterface& iface = pipeline.interface();
    const DeviceProfile& p = device_->profile();
    AKUNU_CHECK(bindings.size() == iface.bindings.size(),
                "kernel '" + pipeline.name() + "' takes " + std::to_string(iface.bindings.size()) + " buffers, got " +
                    std::to_string(bindings.size()));
    AKUNU_CHECK(params_bytes == iface.push_constant_bytes,
                "kernel '" + pipeline.name() + "' expects " + std::to_string(iface.push_constant_bytes) +
                    " bytes of parameters, the host passed " + std::to_string(params_bytes));
    AKUNU_CHECK(gx >= 1 && gy >= 1 && gz >= 1 && gx <= p.max_workgroup_count_x,
                "kernel '" + pipeline.name() + "': workgroup count " + std::to_string(gx) + " is outside [1, " +
                    std::to_string(p.max_workgroup_count_x) + "]");

    std::vector<Range> reads, writes;
    if (windows_ignored_) window = nullptr;
    const uint32_t min_rows = window ? window->min_rows : 0, max_rows = window ? window->max_rows : 0;
    infos_.resize(bindings.size());
    writes_.resize(bindings.size());
    for (size_t i = 0; i < bindings.size(); ++i) {
        const Binding& b = bindings[i];
        AKUNU_CHECK(b.buffer && *b.buffer, "kernel '" + pipeline.name() + "': binding " + std::to_string(i) +
                                               " is an empty buffer");
        AKUNU_CHECK(&b.buffer->device() == device_.get(),
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) + " lives on another device");
        AKUNU_CHECK(b.offset < b.buffer->size(), "kernel '" + pipeline.name() + "': binding " + std::to_string(i) +
                                                     " starts past the end of its buffer");
        AKUNU_CHECK(b.offset % p.min_storage_buffer_offset_alignment == 0,
                    "kernel '" + pipeline.name() + "': binding offset " + std::to_string(b.offset) +
                        " is not a multiple of " + std::to_string(p.min_storage_buffer_offset_alignment));
        hold(*b.buffer);
        const size_t range = b.range ? b.range : b.buffer->size() - b.offset;
        AKUNU_CHECK(b.offset + range <= b.buffer->size(), "kernel '" + pipeline.name() + "': binding " +
                                                              std::to_string(i) + " reaches past its buffer");
        AKUNU_CHECK(range <= p.max_storage_buffer_range,
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) + " spans " +
                        std::to_string(range >> 20) + " MiB; this device binds at most " +
                        std::to_string(p.max_storage_buffer_range >> 20) + " MiB at once");
        AKUNU_CHECK(!b.row_stride || (b.offset % b.row_stride) + b.row_bytes <= b.row_stride,
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) +
                        " is a column view whose columns run past its rows");
        const size_t stride = columns_ignored_ ? 0 : b.row_stride;
        const Range r{b.buffer->id(), b.offset, b.offset + range, min_rows, max_rows, stride, b.row_bytes};
        if (device_->is_cpu()) {
            (iface.bindings[i].written ? writes : reads).push_back(r);
            continue;
        }
        infos_[i] = {b.buffer->handle(), b.offset, range};
        writes_[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes_[i].dstBinding = iface.bindings[i].binding;
        writes_[i].descriptorCount = 1;
        writes_[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes_[i].pBufferInfo = &infos_[i];
        (iface.bindings[i].written ? writes : reads).push_back(r);
    }
    barrier_if_needed(reads, writes, awaits_previous);
    if (device_->is_cpu()) {
        record_cpu(pipeline, bindings, params, params_bytes, gx, gy, gz);
        return;
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
        vkCmdDispatch(cb_, gx, gy, gz);
    ++dispatches_;
}

void CommandList::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) {
    AKUNU_CHECK(recording_, "CommandList::copy outside begin()/end()");
    AKUNU_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size() && bytes > 0,
                "CommandList::copy: the range is empty or outside a buffer");
    hold(src);
    hold(dst);
    barrier_if_needed({{src.id(), src_offset, src_offset + bytes}}, {{dst.id(), dst_offset, dst_offset + bytes}});
    if (device_->is_cpu()) {
        cpu_commands_.push_back(cpu::copy_command(static_cast<uint8_t*>(src.contents()) + src_offset,
                                                  static_cast<uint8_t*>(dst.contents()) + dst_offset, bytes));
        return;
    }
    VkBufferCopy region{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
}

int CommandList::timestamp() {
    AKUNU_CHECK(recording_, "CommandList::timestamp outside begin()/end()");
    if (!queries_ && !device_->is_cpu()) return -1;
    AKUNU_CHECK(timestamps_used_ < max_timestamps_,
                "CommandList: more than " + std::to_string(max_timestamps_) + " timestamps in one list");
    if (device_->is_cpu()) {
        cpu_commands_.push_back(cpu::timestamp_command(&cpu_times_[timestamps_used_]));
        return int(timestamps_used_++);
    }
    vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, timestamps_used_);
    return int(timestamps_used_++);
}

void CommandList::end() {
    AKUNU_CHECK(recording_, "CommandList::end without begin()");
    if (device_->is_cpu()) {
        recording_ = false;
        ended_ = true;
        return;
    }
    // Make every result visible to the host, which reads mapped memory after wait().
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
    AKUNU_VK_CHECK(vkEndCommandBuffer(cb_));
    recording_ = false;
    ended_ = true;
}

void CommandList::submit() {
    AKUNU_CHECK(ended_, "CommandList::submit before end()");
    AKUNU_CHECK(!in_flight_, "CommandList::submit while the previous submit is running; call wait() first");
    if (device_->is_cpu()) {  // synchronous: done when submit returns
        cpu::replay(*device_->threads(), cpu_commands_);
        return;
    }
    AKUNU_VK_CHECK(vkResetFences(device_->handle(), 1, &fence_));
    VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    info.commandBufferCount = 1;
    info.pCommandBuffers = &cb_;
    device_->submit(info, fence_);
    in_flight_ = true;
}

void CommandList::wait() {
    if (!in_flight_) return;  // always so on the CPU backend
    AKUNU_VK_CHECK(vkWaitForFences(device_->handle(), 1, &fence_, VK_TRUE, UINT64_MAX));
    in_flight_ = false;
}

double CommandList::elapsed_ms(int from, int to) const {
    if (device_->is_cpu()) {
        if (from < 0 || to < 0 || uint32_t(std::max(from, to)) >= timestamps_used_) return std::nan("");
        return double(int64_t(cpu_times_[size_t(to)] - cpu_times_[size_t(from)])) * 1e-6;
    }
    if (!queries_ || from < 0 || to < 0 || in_flight_ || uint32_t(std::max(from, to)) >= timestamps_used_)
        return std::nan("");
    uint64_t t[2];
    VkResult r = vkGetQueryPoolResults(device_->handle(), queries_, uint32_t(from), 1, sizeof(uint64_t), &t[0],
                                       sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
    if (r != VK_SUCCESS) return std::nan("");
    r = vkGetQueryPoolResults(device_->handle(), queries_, uint32_t(to), 1, sizeof(uint64_t), &t[1], sizeof(uint64_t),
                              VK_QUERY_RESULT_64_BIT);
    if (r != VK_SUCCESS) return std::nan("");
    return double(int64_t(t[1] - t[0])) * device_->profile().timestamp_period_ns * 1e-6;
}

}  // namespace akunu

namespace akunu {

void CommandList::record_cpu(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                             size_t params_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    cpu::CpuCommand c;
    c.fn = pipeline.cpu_kernel().fn;
    c.min_groups_per_thread = pipeline.cpu_kernel().min_groups_per_thread;
    c.args.variant = pipeline.cpu_kernel().variant;
    for (size_t i = 0; i < bindings.size(); ++i) {
        c.args.b[i] = static_cast<uint8_t*>(bindings[i].buffer->contents()) + bindings[i].offset;
        c.args.bytes[i] = bindings[i].bytes();
    }
    if (params_bytes) std::memcpy(c.args.params, params, params_bytes);
    for (size_t i = 0; i < pipeline.spec().size(); ++i) c.args.spec[i] = pipeline.spec()[i];
    c.args.groups[0] = gx;
    c.args.groups[1] = gy;
    c.args.groups[2] = gz;
    c.groups = size_t(gx) * gy * gz;
    cpu_commands_.push_back(c);
    ++dispatches_;
}

}  // namespace akunu
