// The CPU backend's GEMM on float tile-major weights (F32_T32, F16_T32, BF16_T32) with bf16
// pair products (AVX-512 BF16, gemm_bf16.cpp): per chunk of k, the weight panel and the rows of
// X are rounded to bf16 (round to nearest even) and vdpbf16ps sums the pairs' exact products in
// fp32. Same semantics, parameters and bindings as gemm.comp, less the rounding: f16 weights keep
// 8 of their 11 significant bits, X 8 of 24 (BF16_T32 weights lose nothing). Registered as
// "gemm_<type>_t32_bf16" where the processor has AVX-512 BF16; a CPU device runs it in place of
// "gemm_<type>_t32" under tuning bf16_gemm. Steps of a few rows keep the fp32 short GEMM.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/vulkan/cpu_kernel.h"

namespace akunu::cpu {

// Workgroups [begin, end) of a GEMM (gemm.comp's items) of at least kBf16MinRows rows.
void gemm_bf16(const CpuArgs& a, size_t begin, size_t end);

// acc[i][0:64] += sum_p bf16 pair products of x row i (pairs x[i * ldx + p]) with panel row p
// (w[p][0:64], the pairs of elements 2p and 2p + 1 of each column) for i < m, p < pairs: the
// register-blocked tile of gemm_bf16, which the encoder's attention blocks use too. w is
// 64-byte aligned; a pair holds the even element in its low 16 bits.
void bf16_tile(const uint32_t (*w)[64], size_t pairs, const uint32_t* x, size_t ldx, size_t m, float* acc);

// out[p][0:64] = the pairs (rows[2p][j], rows[2p + 1][j]) of a [n][64] fp32 matrix rounded to
// bf16, p < (n + 1) / 2 (an odd n's last pair has a zero high half); out 64-byte aligned.
void bf16_panel(const float* rows, size_t n, uint32_t (*out)[64]);

// out[0:(n + 1) / 2] = the values in[0:n] rounded to bf16 (nearest even), as pairs; an odd n's
// last pair has a zero high half.
void bf16_pairs(const float* in, size_t n, uint32_t* out);

}  // namespace akunu::cpu
