// A recorded CPU command: the resolved kernel, its arguments (binding pointers, parameter
// block, constants) and its workgroups; what a CommandList on the CPU backend stores at record
// time and runs, in order, on submit(). Replaying does no lookups and no allocation.
#pragma once

#include <vector>

#include "akunu/core/tuning.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/thread_pool.h"

namespace akunu::cpu {

struct CpuCommand {
    CpuKernelFn fn = nullptr;
    CpuArgs args;
    size_t groups = 1;  // x * y * z
    // An indirect dispatch's counts [x, y, z] in host memory, read when the command runs (the
    // table writes them per step: a step of few rows runs few workgroups); null: the recorded ones.
    const uint32_t* counts = nullptr;
    uint32_t min_groups_per_thread = 1;
    float work_us = 0.0f;  // one thread's time for its last run (replay's estimate; 0 before the first)
};

// A byte copy as a command: binding 0 -> binding 1, bytes[0] bytes.
CpuCommand copy_command(uint8_t* src, uint8_t* dst, size_t bytes);

// A timestamp as a command: writes the steady clock, in nanoseconds, to *slot when it runs
// (after every earlier command has finished: the CPU form of a bottom-of-pipe timestamp).
CpuCommand timestamp_command(uint64_t* slot);

// Runs the commands in order; each one finishes before the next starts (every dispatch sees
// all earlier writes, the CPU form of the Vulkan barriers). A command whose last run took less
// than inline_us of one thread's time (its wall time when run here, times the threads when
// shared) runs on the calling thread alone: a decode step's norms, adds and small projections
// take microseconds, and handing them to the pool's threads costs as much, or far more when
// the OS has other work for the cores. A command's first run is shared, so that a list run once
// (a profile's) runs as a replayed step does. inline_us <= 0 shares every command.
void replay(ThreadPool& pool, std::vector<CpuCommand>& commands, double inline_us);

// The inline_us that tuning `cpu_inline_us` asks for.
double inline_us(const Tuning& tuning);

}  // namespace akunu::cpu
