// The CPU form of a CommandList's commands (cpu_recorder.h).
#include "akunu/cpu/cpu_recorder.h"

#include <cmath>
#include <cstring>

#include "akunu/cpu/cpu_replay.h"
#include "akunu/vulkan/device.h"
#include "akunu/vulkan/pipeline.h"

namespace akunu::cpu {

namespace {

class CpuRecorder final : public Recorder {
public:
    CpuRecorder(Device& device, uint32_t max_timestamps)
        : device_(device), times_(max_timestamps, 0), inline_us_(inline_us(device.profile().tuning)) {}

    void begin() override { commands_.clear(); }
    // Commands run one after another: nothing to record.
    void barrier() override {}
    void dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                  size_t params_bytes, const uint32_t groups[3], const Buffer*, size_t) override;
    void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset, size_t bytes) override {
        commands_.push_back(copy_command(static_cast<uint8_t*>(src.contents()) + src_offset,
                                         static_cast<uint8_t*>(dst.contents()) + dst_offset, bytes));
    }
    bool has_timestamps() const override { return true; }  // the host clock, between commands
    void timestamp(uint32_t index) override { commands_.push_back(timestamp_command(&times_[index])); }
    void end() override {}
    void submit() override { replay(*device_.threads(), commands_, inline_us_); }  // synchronous: done when it returns
    void wait(bool) override {}
    double elapsed_ms(uint32_t from, uint32_t to) const override {
        return double(int64_t(times_[to] - times_[from])) * 1e-6;
    }

private:
    Device& device_;
    std::vector<CpuCommand> commands_;
    std::vector<uint64_t> times_;  // the timestamps' slots (ns)
    double inline_us_;  // commands that took less run on the calling thread (cpu_replay.h)
};

// A dispatch runs its recorded groups, an indirect one the counts its table writes per step
// (host memory: read when the command runs).
void CpuRecorder::dispatch(const Pipeline& pipeline, const std::vector<Binding>& bindings, const void* params,
                           size_t params_bytes, const uint32_t groups[3], const Buffer* counts, size_t counts_offset) {
    CpuCommand c;
    c.fn = pipeline.cpu_kernel().fn;
    c.min_groups_per_thread = pipeline.cpu_kernel().min_groups_per_thread;
    c.args.variant = pipeline.cpu_kernel().variant;
    for (size_t i = 0; i < bindings.size(); ++i) {
        c.args.b[i] = static_cast<uint8_t*>(bindings[i].buffer->contents()) + bindings[i].offset;
        c.args.bytes[i] = bindings[i].bytes();
    }
    if (params_bytes) std::memcpy(c.args.params, params, params_bytes);
    for (size_t i = 0; i < pipeline.spec().size(); ++i) c.args.spec[i] = pipeline.spec()[i];
    for (int i = 0; i < 3; ++i) c.args.groups[i] = groups[i];
    c.groups = size_t(groups[0]) * groups[1] * groups[2];
    if (counts)
        c.counts = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(counts->contents()) + counts_offset);
    commands_.push_back(c);
}

}  // namespace

std::unique_ptr<Recorder> make_recorder(Device& device, uint32_t max_timestamps) {
    return std::make_unique<CpuRecorder>(device, max_timestamps);
}

}  // namespace akunu::cpu
