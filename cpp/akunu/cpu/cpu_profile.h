// The CPU backend's DeviceProfile and the facts about this processor the kernels choose from.
//
// The profile states the limits the kernel launchers check (workgroup counts, binding ranges,
// alignment) with values that never bind on the CPU, and one memory heap: the machine's RAM.
#pragma once

#include "akunu/vulkan/device_profile.h"

namespace akunu::cpu {

DeviceProfile cpu_profile(const Tuning& tuning = Tuning::from_environment());

// Worker threads: AKUNU_THREADS when set, else the cores this process may run on.
unsigned thread_count();

// The instruction-set tier the kernels use: the best that cpuid reports, capped by
// AKUNU_CPU_ISA ("scalar", "avx2" or "avx512"), so that
// tests can run every tier on one machine.
enum class CpuIsa { kScalar, kAvx2, kAvx512 };
CpuIsa cpu_isa();
const char* cpu_isa_name(CpuIsa isa);

// (Not inline: the files built with -mavx2 include this header, and an inline copy compiled
// there could be the one the linker keeps.)
// AVX2 + FMA + F16C: the vectorised kernels run, else their scalar fallbacks.
bool use_avx2();
// AVX-512F as well: the GEMM's wider register block (gemm_avx512.cpp).
bool use_avx512();
// AVX-512BW and VNNI as well: the integer prefill GEMM (gemm_vnni.h).
bool use_avx512_vnni();
// AVX-512BW and BF16 as well: the bf16 GEMM on float tiles (gemm_bf16.h).
bool use_avx512_bf16();

}  // namespace akunu::cpu
