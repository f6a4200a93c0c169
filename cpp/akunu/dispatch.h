// DispatchCmd and DispatchTable: a kernel dispatch as data, and the flat list of them that is
// built once at load and recorded into a command buffer (the seed's dispatch table).
//
// Kernel launchers (kernels.h) emit DispatchCmds into a DispatchSink: a CommandList records
// them at once, a DispatchTable keeps them for recording later and for inspection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "akunu/buffer.h"
#include "akunu/pipeline.h"

namespace akunu {

// A range of a buffer bound to a kernel's binding slot (in binding-number order).
struct Binding {
    const Buffer* buffer = nullptr;
    size_t offset = 0;
    size_t range = 0;  // 0: to the end of the buffer

    Binding() = default;
    Binding(const Buffer* b, size_t off = 0, size_t r = 0) : buffer(b), offset(off), range(r) {}
    Binding(const Buffer& b, size_t off = 0, size_t r = 0) : buffer(&b), offset(off), range(r) {}
    // Bytes visible through this binding.
    size_t bytes() const { return !buffer || offset > buffer->size() ? 0 : (range ? range : buffer->size() - offset); }
};

struct DispatchCmd {
    std::string label;   // "blk.3.attn_q", for inspection
    const Pipeline* pipeline = nullptr;
    std::vector<Binding> bindings;
    std::vector<uint8_t> params;  // the kernel's push-constant block
    uint32_t groups[3] = {1, 1, 1};
};

class DispatchSink {
public:
    virtual ~DispatchSink() = default;
    virtual Device& device() const = 0;
    virtual void dispatch(const DispatchCmd& cmd) = 0;
    // The label the next dispatches carry (set by whoever builds a model's table).
    void set_label(std::string label) { label_ = std::move(label); }
    const std::string& label() const { return label_; }

private:
    std::string label_;
};

class CommandList;

class DispatchTable : public DispatchSink {
public:
    explicit DispatchTable(Device& device) : device_(&device) {}
    Device& device() const override { return *device_; }
    void dispatch(const DispatchCmd& cmd) override { cmds_.push_back(cmd); }
    // Records every command into `cl`; with `timestamps`, a GPU timestamp before the first
    // command and after each one (their indices are appended): the per-kernel profile.
    void record(CommandList& cl, std::vector<int>* timestamps = nullptr) const;
    const std::vector<DispatchCmd>& commands() const { return cmds_; }

private:
    Device* device_;
    std::vector<DispatchCmd> cmds_;
};

}  // namespace akunu
