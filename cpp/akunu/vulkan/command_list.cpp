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

CommandList::CommandList(std::shared_ptr<Device> device, uint32_t max_timestamps)
    : device_(std::move(device)), recorder_(device_->recorder(max_timestamps)), max_timestamps_(max_timestamps) {
    windows_ignored_ = !device_->profile().tuning.row_windows;
    columns_ignored_ = !device_->profile().tuning.column_views;
}

CommandList::~CommandList() = default;

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
    recorder_->begin();
    recording_ = true;
    ended_ = false;
    dispatches_ = barriers_ = 0;
    timestamps_used_ = 0;
    read_since_barrier_.clear();
    written_since_barrier_.clear();
    last_writes_ = 0;
    owners_.clear();
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
    recorder_->barrier();
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
    for (const Range& r : reads) hazard = hazard || overlaps(written_since_barrier_, r, written);  // RAW
    for (const Range& w : writes)
        hazard =
            hazard || overlaps(written_since_barrier_, w, written) || overlaps(read_since_barrier_, w);  // WAW, WAR
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
    AKUNU_CHECK(
        &args.device() == device_.get() && offset % 4 == 0 && offset + sizeof(VkDispatchIndirectCommand) <= args.size(),
        "CommandList::dispatch_indirect: the counts are not a VkDispatchIndirectCommand inside a buffer of this "
        "device");
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
    AKUNU_CHECK(bindings.size() == iface.bindings.size(), "kernel '" + pipeline.name() + "' takes " +
                                                              std::to_string(iface.bindings.size()) + " buffers, got " +
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
    for (size_t i = 0; i < bindings.size(); ++i) {
        const Binding& b = bindings[i];
        AKUNU_CHECK(b.buffer && *b.buffer,
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) + " is an empty buffer");
        AKUNU_CHECK(&b.buffer->device() == device_.get(),
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) + " lives on another device");
        AKUNU_CHECK(b.offset < b.buffer->size(), "kernel '" + pipeline.name() + "': binding " + std::to_string(i) +
                                                     " starts past the end of its buffer");
        AKUNU_CHECK(b.offset % p.min_storage_buffer_offset_alignment == 0,
                    "kernel '" + pipeline.name() + "': binding offset " + std::to_string(b.offset) +
                        " is not a multiple of " + std::to_string(p.min_storage_buffer_offset_alignment));
        hold(*b.buffer);
        const size_t range = b.range ? b.range : b.buffer->size() - b.offset;
        AKUNU_CHECK(b.offset + range <= b.buffer->size(),
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) + " reaches past its buffer");
        AKUNU_CHECK(range <= p.max_storage_buffer_range,
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) + " spans " +
                        std::to_string(range >> 20) + " MiB; this device binds at most " +
                        std::to_string(p.max_storage_buffer_range >> 20) + " MiB at once");
        AKUNU_CHECK(!b.row_stride || (b.offset % b.row_stride) + b.row_bytes <= b.row_stride,
                    "kernel '" + pipeline.name() + "': binding " + std::to_string(i) +
                        " is a column view whose columns run past its rows");
        const size_t stride = columns_ignored_ ? 0 : b.row_stride;
        const Range r{b.buffer->id(), b.offset, b.offset + range, min_rows, max_rows, stride, b.row_bytes};
        (iface.bindings[i].written ? writes : reads).push_back(r);
    }
    barrier_if_needed(reads, writes, awaits_previous);
    recorder_->dispatch(pipeline, bindings, params, params_bytes, groups, args, args_offset);
    ++dispatches_;
}

void CommandList::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) {
    AKUNU_CHECK(recording_, "CommandList::copy outside begin()/end()");
    AKUNU_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size() && bytes > 0,
                "CommandList::copy: the range is empty or outside a buffer");
    hold(src);
    hold(dst);
    barrier_if_needed({{src.id(), src_offset, src_offset + bytes}}, {{dst.id(), dst_offset, dst_offset + bytes}});
    recorder_->copy(src, src_offset, dst, dst_offset, bytes);
}

int CommandList::timestamp() {
    AKUNU_CHECK(recording_, "CommandList::timestamp outside begin()/end()");
    if (!recorder_->has_timestamps()) return -1;
    AKUNU_CHECK(timestamps_used_ < max_timestamps_,
                "CommandList: more than " + std::to_string(max_timestamps_) + " timestamps in one list");
    recorder_->timestamp(timestamps_used_);
    return int(timestamps_used_++);
}

void CommandList::end() {
    AKUNU_CHECK(recording_, "CommandList::end without begin()");
    recorder_->end();
    recording_ = false;
    ended_ = true;
}

void CommandList::submit() {
    AKUNU_CHECK(ended_, "CommandList::submit before end()");
    recorder_->submit();
}

void CommandList::wait(bool spin) { recorder_->wait(spin); }

void CommandList::submit_and_wait() {
    submit();
    recorder_->wait(device_->profile().spin_wait);
}

double CommandList::elapsed_ms(int from, int to) const {
    if (from < 0 || to < 0 || uint32_t(std::max(from, to)) >= timestamps_used_) return std::nan("");
    return recorder_->elapsed_ms(uint32_t(from), uint32_t(to));
}

}  // namespace akunu
