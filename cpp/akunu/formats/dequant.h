// CPU dequantizers to float32, one per block format, in ggml's block layouts. They serve model
// inspection and the CPU references that GPU kernels are tested against.
#pragma once

#include <cstddef>
#include <cstdint>

namespace akunu::dequant {

void f32(const uint8_t* src, float* dst, size_t n);
void f16(const uint8_t* src, float* dst, size_t n);
void bf16(const uint8_t* src, float* dst, size_t n);
void f64(const uint8_t* src, float* dst, size_t n);
void i8(const uint8_t* src, float* dst, size_t n);
void i16(const uint8_t* src, float* dst, size_t n);
void i32(const uint8_t* src, float* dst, size_t n);
void u8(const uint8_t* src, float* dst, size_t n);
void u32(const uint8_t* src, float* dst, size_t n);
void q4_0(const uint8_t* src, float* dst, size_t blocks);
void q4_1(const uint8_t* src, float* dst, size_t blocks);
void q5_0(const uint8_t* src, float* dst, size_t blocks);
void q5_1(const uint8_t* src, float* dst, size_t blocks);
void q8_0(const uint8_t* src, float* dst, size_t blocks);
void q4_k(const uint8_t* src, float* dst, size_t blocks);
void q5_k(const uint8_t* src, float* dst, size_t blocks);
void q6_k(const uint8_t* src, float* dst, size_t blocks);

}  // namespace akunu::dequant
