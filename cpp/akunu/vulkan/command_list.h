// CommandList: records compute dispatches into a Vulkan command buffer, submits it and waits.
//
// It inserts a barrier only where a dispatch depends on an earlier one in the same list (it
// reads or writes a buffer written since the last barrier, or writes one read since then);
// independent dispatches (Q, K, V projections) run without one, and so do a chunk's dispatches
// whose row windows do not meet (ChunkRows: of a projection's GEMMs for short and for long
// chunks, only one has workgroups for any chunk). Which bindings a kernel writes
// comes from its SPIR-V. A recorded list can be submitted any number of times.
// What the checks and the tracking leave goes to the device's Recorder (recorder.h): a Vulkan
// command buffer, or on the CPU backend resolved CPU commands that submit() runs on the
// device's thread pool before returning.
#pragma once

#include <memory>
#include <vector>

#include "akunu/vulkan/dispatch.h"
#include "akunu/vulkan/recorder.h"

namespace akunu {

class CommandList : public DispatchSink {
public:
    explicit CommandList(std::shared_ptr<Device> device, uint32_t max_timestamps = 64);
    ~CommandList();
    CommandList(const CommandList&) = delete;
    CommandList& operator=(const CommandList&) = delete;

    // Starts (or restarts) recording; earlier contents are discarded.
    void begin();

    // One dispatch. `bindings` go to the kernel's bindings in order; `params` must be exactly
    // the kernel's push-constant block (checked against its SPIR-V).
    void dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                  size_t params_bytes, uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
    template <class Params>
    void dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const Params& params,
                  uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1) {
        dispatch(pipeline, bindings, &params, sizeof(Params), groups_x, groups_y, groups_z);
    }

    // DispatchSink: records the command now.
    void dispatch(const DispatchCmd& cmd) override {
        record_dispatch(*cmd.pipeline, cmd.bindings, cmd.params.data(), cmd.params.size(), cmd.groups, nullptr, 0,
                        cmd.awaits_previous);
    }
    // The command with its workgroup counts read when the list runs, from the
    // VkDispatchIndirectCommand at `offset` of `args` (host memory: DispatchTable::set_tokens
    // writes it between submissions). cmd.groups are the largest counts, checked here.
    void dispatch_indirect(const DispatchCmd& cmd, const Buffer& args, size_t offset);

    void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes);

    // Writes a timestamp after all work recorded so far (a GPU timestamp, or the host clock on
    // the CPU backend); returns its index (or -1 when the queue has no timestamps).
    int timestamp();

    void end();
    void submit();  // asynchronous; the list must be ended
    void wait(bool spin = false);  // waits for the last submit (with `spin`, by polling its fence)
    // Submits and waits at once: polling the fence where the device profile says (spin_wait).
    void submit_and_wait();

    // Milliseconds between two timestamps of the last completed submission; NaN when unavailable.
    double elapsed_ms(int from, int to) const;

    uint32_t dispatch_count() const { return dispatches_; }
    uint32_t barrier_count() const { return barriers_; }
    Device& device() const override { return *device_; }

private:
    struct Range {
        const void* buffer;  // Buffer::id()
        size_t begin, end;
        // The chunk lengths n for which the command runs at all, min_rows <= n < max_rows
        // (max_rows 0: no bound): an indirect dispatch of a chunk's table outside its window has
        // no workgroups, whatever n the table was given (ChunkRows::groups_for).
        uint32_t min_rows = 0, max_rows = 0;
        size_t stride = 0, width = 0;  // a column view's (Binding::row_stride, row_bytes); 0: the whole range
    };
    void barrier_if_needed(const std::vector<Range>& reads, const std::vector<Range>& writes,
                           bool awaits_previous = false);
    void record_barrier();
    void record_dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                         size_t params_bytes, const uint32_t groups[3], const Buffer* args, size_t args_offset,
                         bool awaits_previous, const ChunkRows* window = nullptr);

    std::shared_ptr<Device> device_;
    std::unique_ptr<Recorder> recorder_;  // the backend's commands
    uint32_t max_timestamps_ = 0;
    uint32_t timestamps_used_ = 0;
    bool recording_ = false;
    bool ended_ = false;

    // Buffers read and written since the last barrier. Recording happens at load, not per token.
    std::vector<Range> read_since_barrier_, written_since_barrier_;
    size_t last_writes_ = 0;  // how many of written_since_barrier_ the last command added
    // Tuning row_windows=0: row windows ignored, a barrier wherever ranges meet (A/B runs).
    bool windows_ignored_ = false;
    // Tuning column_views=0: column views (Binding::columns) tracked as plain ranges (A/B runs).
    bool columns_ignored_ = false;
    // The owners of the buffers recorded since begin() (Buffer::owner), held until the next
    // begin() or the list's end of life: the commands point at their memory.
    std::vector<std::shared_ptr<const void>> owners_;
    void hold(const Buffer& b);
    uint32_t dispatches_ = 0;
    uint32_t barriers_ = 0;
};

}  // namespace akunu
