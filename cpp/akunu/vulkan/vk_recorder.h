// The Vulkan Recorder: a primary command buffer with push descriptors, memory barriers between
// dependent dispatches, a timestamp query pool and a fence for submit/wait.
#pragma once

#include <memory>

#include "akunu/vulkan/device.h"
#include "akunu/vulkan/recorder.h"

namespace akunu {

std::unique_ptr<Recorder> make_vulkan_recorder(std::shared_ptr<Device> device, uint32_t max_timestamps);

}  // namespace akunu
