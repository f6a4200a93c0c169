// The CPU backend's Recorder: each dispatch resolved at record time into a CpuCommand (the
// kernel function, binding pointers, parameters, constants), run in order on the device's
// thread pool by submit(), which returns when they are done.
#pragma once

#include <memory>

#include "akunu/vulkan/recorder.h"

namespace akunu {
class Device;
}

namespace akunu::cpu {

std::unique_ptr<Recorder> make_recorder(Device& device, uint32_t max_timestamps);

}  // namespace akunu::cpu
