// A recorded CPU command: the resolved kernel, its arguments (binding pointers, parameter
// block, constants) and its workgroups; what a CommandList on the CPU backend stores at record
// time and runs, in order, on submit(). Replaying does no lookups and no allocation.
#pragma once

#include <vector>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/thread_pool.h"

namespace akunu::cpu {

struct CpuCommand {
    CpuKernelFn fn = nullptr;
    CpuArgs args;
    size_t groups = 1;  // x * y * z
    uint32_t min_groups_per_thread = 1;
};

// A byte copy as a command: binding 0 -> binding 1, bytes[0] bytes.
CpuCommand copy_command(uint8_t* src, uint8_t* dst, size_t bytes);

// A timestamp as a command: writes the steady clock, in nanoseconds, to *slot when it runs
// (after every earlier command has finished: the CPU form of a bottom-of-pipe timestamp).
CpuCommand timestamp_command(uint64_t* slot);

// Runs the commands in order; each one finishes before the next starts (every dispatch sees
// all earlier writes, the CPU form of the Vulkan barriers).
void replay(ThreadPool& pool, const std::vector<CpuCommand>& commands);

}  // namespace akunu::cpu
