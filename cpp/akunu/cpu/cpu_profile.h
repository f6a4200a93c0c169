// The CPU backend's DeviceProfile and the facts about this processor the kernels choose from.
//
// The profile states the limits the kernel launchers check (workgroup counts, binding ranges,
// alignment) with values that never bind on the CPU, and one memory heap: the machine's RAM.
#pragma once

#include "akunu/device_profile.h"

namespace akunu::cpu {

DeviceProfile cpu_profile();

// Worker threads: AKUNU_THREADS when set, else the cores this process may run on.
unsigned thread_count();

// True when the processor has AVX2, FMA and F16C (cpuid) and AKUNU_CPU_SCALAR is not set:
// the vectorised kernels run, else their scalar fallbacks.
bool use_avx2();

// AKUNU_CPU_INT8=1: GEMVs on q8_0/q4_0/q4_1 weights quantize x to 8 bits per block and use
// integer dot products (cpu/tile_dot.h): faster, at the cost of x's rounding. Read when a CPU
// device is created (DeviceProfile::cpu_int8_dot).
bool int8_activations();

}  // namespace akunu::cpu
