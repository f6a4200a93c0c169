// Rounding of float rows to ggml's Q8_0: blocks of 32, scale max|x| / 127, codes rounded half
// to even. The CPU GEMV rounds x this way (cpu/tile_dot.h quantize_x), and a weight stored as
// a Q8_0 copy (the Whisper head's text rows) is rounded the same way at load.
#pragma once

#include <cstddef>
#include <cstdint>

namespace akunu::quantize {

// k / 32 blocks of x: codes q[k], scales d[k / 32] and code sums sum[k / 32]. k is a multiple of 32.
void q8_0_codes(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);

// The same rounding written as ggml's block_q8_0 (f16 scale, 32 codes): k / 32 * 34 bytes.
void q8_0_blocks(const float* x, size_t k, uint8_t* blocks);

}  // namespace akunu::quantize
