// Recorder: what a CommandList records into, one per backend. The CommandList does what both
// backends share (argument checks against the kernel's SPIR-V, hazard tracking, the buffers'
// owners, counts); a Recorder turns the result into the backend's commands: a Vulkan command
// buffer (vk_recorder.h) or resolved CPU kernel calls (cpu/cpu_recorder.h). Device::recorder()
// makes the one of its backend; nothing else asks which backend a device is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/dispatch.h"

namespace akunu {

class Pipeline;

class Recorder {
public:
    virtual ~Recorder() = default;
    // Starts (or restarts) recording; earlier contents are discarded. Throws while a submission
    // of this recorder still runs.
    virtual void begin() = 0;
    // Everything recorded before finishes (its writes visible) before anything after starts.
    virtual void barrier() = 0;
    // One dispatch of checked bindings; with `args`, its workgroup counts are read when the
    // commands run, from the VkDispatchIndirectCommand at `args_offset` (`groups` the largest).
    virtual void dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                          size_t params_bytes, const uint32_t groups[3], const Buffer* args, size_t args_offset) = 0;
    virtual void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) = 0;
    // Whether timestamp() records anything (the queue has timestamps, or the host clock).
    virtual bool has_timestamps() const = 0;
    // A timestamp into slot `index` after all work recorded so far.
    virtual void timestamp(uint32_t index) = 0;
    virtual void end() = 0;
    virtual void submit() = 0;  // asynchronous where the backend is; the recording must be ended
    virtual void wait(bool poll) = 0;  // waits for the last submit; `poll`: spinning, not sleeping
    // Milliseconds between two written slots of the last completed submission; NaN when
    // unavailable (still running, or the driver does not say).
    virtual double elapsed_ms(uint32_t from, uint32_t to) const = 0;
};

}  // namespace akunu
