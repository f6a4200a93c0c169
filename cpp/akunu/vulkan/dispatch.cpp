// DispatchTable: recording, and the workgroup counts of a prefill chunk's dispatches.
#include "akunu/vulkan/dispatch.h"

#include <algorithm>

#include "akunu/vulkan/command_list.h"
#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"

namespace akunu {

void ChunkRows::groups_for(uint32_t n, const uint32_t recorded[3], uint32_t out[3]) const {
    std::copy(recorded, recorded + 3, out);
    if (n < min_rows || (max_rows && n >= max_rows)) {  // outside the kernel's row window: it would do nothing
        out[0] = out[1] = out[2] = 0;
        return;
    }
    n = std::min(n, rows);
    // The groups that cover n of the recorded rows: ceil(g * n / rows), which is at least the
    // ceil(n / rows per group) the kernel needs, also where rows is not a multiple of its block.
    auto part = [&](uint64_t g) { return uint32_t((g * n + rows - 1) / rows); };
    switch (axis) {
        case Axis::kNone: break;
        case Axis::kX: out[0] = part(recorded[0]); break;
        case Axis::kY: out[1] = part(recorded[1]); break;
        case Axis::kLinear: {
            // linear_group_id() = y * width + x: keep the recorded width unless fewer groups remain.
            const uint32_t total = part(uint64_t(recorded[0]) * recorded[1]);
            out[0] = std::min(total, recorded[0]);
            out[1] = out[0] ? (total + out[0] - 1) / out[0] : 0;  // n = 0 (no untiled rows): none
            break;
        }
    }
}

void DispatchTable::dispatch(const DispatchCmd& cmd) {
    if (insert_ == kAppend) {
        if (cmd.follows()) following_.push_back(cmds_.size());
        cmds_.push_back(cmd);
        return;
    }
    // The commands after the insertion move up one; following_ stays in command order, the
    // order in which record() hands out count slots.
    for (size_t& f : following_) f += f >= insert_ ? 1 : 0;
    if (cmd.follows()) following_.insert(std::lower_bound(following_.begin(), following_.end(), insert_), insert_);
    cmds_.insert(cmds_.begin() + std::ptrdiff_t(insert_), cmd);
    ++insert_;
}

void DispatchTable::insert_at(size_t index) {
    AKUNU_CHECK(index <= cmds_.size(), "DispatchTable::insert_at: index " + std::to_string(index) +
                                           " is past the table's " + std::to_string(cmds_.size()) + " commands");
    insert_ = index;
}

void DispatchTable::set_tokens(uint32_t n) {
    AKUNU_CHECK(n >= 1, "DispatchTable::set_tokens: a chunk has at least one token");
    tokens_ = n;
    write_counts();
}

void DispatchTable::set_position(uint32_t pos) {
    position_ = pos;
    write_counts();
}

void DispatchTable::set_step(uint32_t n, uint32_t pos, uint32_t untiled) {
    AKUNU_CHECK(n >= 1, "DispatchTable::set_step: a step has at least one row");
    tokens_ = n;
    position_ = pos;
    untiled_ = untiled;
    write_counts();
}

void DispatchTable::use_counts(const Buffer& buffer, size_t offset, size_t bytes) {
    const size_t need = following_.size() * sizeof(VkDispatchIndirectCommand);
    AKUNU_CHECK(need <= bytes, "a dispatch table has " + std::to_string(following_.size()) +
                                   " dispatches that follow its chunk or position, more than the memory plan's " +
                                   std::to_string(bytes / sizeof(VkDispatchIndirectCommand)) +
                                   " (chunk_dispatch_bound, step_dispatch_bound in dispatch.h)");
    AKUNU_CHECK(buffer.contents() && offset % 4 == 0 && offset + bytes <= buffer.size(),
                "DispatchTable::use_counts: the range is not mapped host memory inside the buffer");
    counts_ = Binding(buffer, offset, bytes);
    write_counts();
}

void DispatchTable::write_counts() const {
    if (!counts_.buffer) return;  // not placed yet: the first recording writes them
    auto* args = reinterpret_cast<VkDispatchIndirectCommand*>(static_cast<uint8_t*>(counts_.buffer->contents()) +
                                                              counts_.offset);
    for (size_t i = 0; i < following_.size(); ++i) {
        const DispatchCmd& cmd = cmds_[following_[i]];
        uint32_t g[3] = {cmd.groups[0], cmd.groups[1], cmd.groups[2]};
        const uint32_t n = cmd.chunk.untiled && untiled_ != kAllRows ? untiled_ : tokens_ ? tokens_ : cmd.chunk.rows;
        if (cmd.chunk.follows()) cmd.chunk.groups_for(n, cmd.groups, g);
        if (cmd.position_block && position_ != kWholeContext) g[1] = std::min(g[1], position_ / cmd.position_block + 1);
        args[i] = {g[0], g[1], g[2]};
    }
}

void DispatchTable::record(CommandList& cl, std::vector<int>* timestamps) const {
    // The counts live in mapped memory (use_counts, or a host buffer made at the first
    // recording, when the table is complete), where the backend reads them at all.
    const DeviceProfile& p = device_->profile();
    const bool indirect = !following_.empty() && p.indirect_counts;
    if (indirect && !counts_.buffer) {
        own_counts_ = Buffer::allocate(device_->shared_from_this(),
                                       following_.size() * sizeof(VkDispatchIndirectCommand), Residency::kHost);
        AKUNU_CHECK(own_counts_.contents(),
                    "'" + device_->profile().name + "' cannot map host memory for dispatch counts");
        counts_ = Binding(own_counts_);
        write_counts();
    }
    if (timestamps) timestamps->push_back(cl.timestamp());
    size_t slot = 0;
    for (const DispatchCmd& cmd : cmds_) {
        if (indirect && cmd.follows())
            cl.dispatch_indirect(cmd, *counts_.buffer, counts_.offset + sizeof(VkDispatchIndirectCommand) * slot++);
        else
            cl.dispatch(cmd);
        if (timestamps) timestamps->push_back(cl.timestamp());
    }
}

}  // namespace akunu
