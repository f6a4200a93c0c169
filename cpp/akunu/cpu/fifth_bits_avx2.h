// Q5_0/Q5_1 tiles' fifth bits as bytes, for the AVX2 tile products and unpacking (included only
// by files built with AVX2). A q5 block column keeps each row's 32 bits of qh as one 32-bit
// lane (tile_dot.h Block32); chunk c's codes need bits 4c..4c+3 (low nibbles, elements 4c + e)
// and 16 + 4c..16 + 4c + 3 (high nibbles, elements 16 + 4c + e).
#pragma once

#include <immintrin.h>

namespace akunu::cpu {

// m: 8 rows' qh shifted down by 4c. Byte `at` (0: the low nibbles' bits, 2: the high ones') of
// each 32-bit lane is copied to the lane's four bytes; byte e becomes 16 where its bit e is set,
// else 0: the value to OR into the code in byte e of that row's chunk.
static inline __m256i fifth_bits(__m256i m, int at) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,  //
                                            0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    const __m256i bit = _mm256_set1_epi32(0x08040201);
    const __m256i t =
        _mm256_and_si256(_mm256_shuffle_epi8(m, _mm256_add_epi8(spread, _mm256_set1_epi8(char(at)))), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(t, bit), _mm256_set1_epi8(0x10));
}

}  // namespace akunu::cpu
