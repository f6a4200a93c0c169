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


}  // namespace akunu::cpu
