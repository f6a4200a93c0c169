// The CPU backend's prefill GEMM on quantized tile-major weights with integer products
// (AVX-512 VNNI, gemm_vnni.cpp): x rounded to 16 bits per block of 32 as the GEMV rounds it.
// Same semantics, parameters and bindings as gemm.comp; registered as "gemm_<type>_t32_i16",
// which a CPU device runs in place of "gemm_<type>_t32" (tuning int_gemm, on by default) when
// the processor has AVX-512 VNNI. The fp32 GEMM on dequantized panels stays the portable form.
// gemm_vnni8 (gemm_vnni8.cpp, "gemm_<type>_t32_x8", tuning int8_gemm, off by default) rounds x
// to 8 bits per block of 32 instead, as llama.cpp's q8_0, and multiplies bytes (vpdpbusd):
// twice the products per instruction, x within 1/254 of its block's largest value.
#pragma once

#include <cstddef>

#include "akunu/vulkan/cpu_kernel.h"

namespace akunu::cpu {

// Workgroups [begin, end) of a GEMM on Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K tiles.
void gemm_vnni(const CpuArgs& a, size_t begin, size_t end);
// The same with x rounded to 8 bits.
void gemm_vnni8(const CpuArgs& a, size_t begin, size_t end);

}  // namespace akunu::cpu
