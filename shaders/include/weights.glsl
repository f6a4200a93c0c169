// Weight access for every supported weight type, selected by one define per variant
// (WTYPE_F32, WTYPE_F16, WTYPE_BF16, WTYPE_Q8_0, WTYPE_Q4_0, WTYPE_Q4_1). The includer sets
// W_BINDING. Float types expose w_load1/w_load4; block formats (32 elements per block, ggml
// layouts) expose w_block(), which decodes one block into 32 floats.
#ifndef AKUNU_WEIGHTS_GLSL
#define AKUNU_WEIGHTS_GLSL

#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

#if defined(WTYPE_F32)
#define W_BLOCK 1
layout(std430, binding = W_BINDING) readonly buffer Wv { vec4 w4[]; };
layout(std430, binding = W_BINDING) readonly buffer Ws { float w1[]; };
float w_load1(uint i) { return w1[i]; }
vec4 w_load4(uint i) { return w4[i]; }
#elif defined(WTYPE_F16)
#define W_BLOCK 1
layout(std430, binding = W_BINDING) readonly buffer Wv { f16vec4 w4[]; };
layout(std430, binding = W_BINDING) readonly buffer Ws { float16_t w1[]; };
float w_load1(uint i) { return float(w1[i]); }
vec4 w_load4(uint i) { return vec4(w4[i]); }
#elif defined(WTYPE_BF16)
#define W_BLOCK 1
// bfloat16 is the top half of a float32.
layout(std430, binding = W_BINDING) readonly buffer Wv { u16vec4 w4[]; };
layout(std430, binding = W_BINDING) readonly buffer Ws { uint16_t w1[]; };
float w_load1(uint i) { return uintBitsToFloat(uint(w1[i]) << 16); }
vec4 w_load4(uint i) { return uintBitsToFloat(uvec4(w4[i]) << 16); }
#else
#define W_BLOCK 32
// Every 32-element block format here is a whole number of 16-bit words (18, 20, 34 bytes), so
// blocks are read as 16-bit words: two weights per load for Q8_0, four for Q4_0/Q4_1.
layout(std430, binding = W_BINDING) readonly buffer Wb { uint8_t wb[]; };
layout(std430, binding = W_BINDING) readonly buffer Wh { uint16_t wh[]; };

float w_half(uint byte) { return unpackHalf2x16(uint(wb[byte]) | (uint(wb[byte + 1]) << 8)).x; }
float w_half_word(uint word) { return unpackHalf2x16(uint(wh[word])).x; }

#if defined(WTYPE_Q8_0)
#define W_BLOCK_BYTES 34
// block_q8_0 {half d; int8 qs[32]}
void w_block(uint block, out float v[32]) {
    const uint b = block * W_BLOCK_BYTES;
    const float d = w_half(b);
    for (uint j = 0; j < 32; ++j) v[j] = d * float(int8_t(wb[b + 2 + j]));
}
#elif defined(WTYPE_Q4_0)
#define W_BLOCK_BYTES 18
// block_q4_0 {half d; u8 qs[16]}: low nibbles are elements 0..15, high nibbles 16..31.
void w_block(uint block, out float v[32]) {
    const uint b = block * W_BLOCK_BYTES;
    const float d = w_half(b);
    for (uint j = 0; j < 16; ++j) {
        const uint q = uint(wb[b + 2 + j]);
        v[j] = d * (float(q & 15u) - 8.0);
        v[j + 16] = d * (float(q >> 4) - 8.0);
    }
}
#elif defined(WTYPE_Q4_1)
#define W_BLOCK_BYTES 20
// block_q4_1 {half d; half m; u8 qs[16]}
void w_block(uint block, out float v[32]) {
    const uint b = block * W_BLOCK_BYTES;
    const float d = w_half(b), m = w_half(b + 2);
    for (uint j = 0; j < 16; ++j) {
        const uint q = uint(wb[b + 4 + j]);
        v[j] = d * float(q & 15u) + m;
        v[j + 16] = d * float(q >> 4) + m;
    }
}
#else
#error "no WTYPE_* defined"
#endif

// dot(block, x[xbase : xbase + 32]) where the includer defines W_X(i) as its x[i].
#ifdef W_X
float w_block_dot(uint block, uint xbase) {
    const uint w = block * (W_BLOCK_BYTES / 2);
#if defined(WTYPE_Q8_0)
    float s = 0.0;
    for (uint j = 0; j < 16; ++j) {
        const uint u = uint(wh[w + 1 + j]);
        s += float(int8_t(u & 255u)) * W_X(xbase + 2 * j) + float(int8_t(u >> 8)) * W_X(xbase + 2 * j + 1);
    }
    return w_half_word(w) * s;
#else
#if defined(WTYPE_Q4_0)
    const uint q0 = w + 1;
#else
    const uint q0 = w + 2;
#endif
    float s = 0.0, sx = 0.0;
    for (uint j = 0; j < 8; ++j) {
        const uint u = uint(wh[q0 + j]);  // bytes 2j and 2j+1 of qs
        // Low nibbles are elements 0..15, high nibbles 16..31.
        const float xa = W_X(xbase + 2 * j), xb = W_X(xbase + 2 * j + 1);
        const float xc = W_X(xbase + 2 * j + 16), xd = W_X(xbase + 2 * j + 17);
        s += float(u & 15u) * xa + float((u >> 4) & 15u) * xc + float((u >> 8) & 15u) * xb + float(u >> 12) * xd;
        sx += xa + xb + xc + xd;
    }
#if defined(WTYPE_Q4_0)
    return w_half_word(w) * (s - 8.0 * sx);
#else
    return w_half_word(w) * s + w_half_word(w + 1) * sx;
#endif
#endif
}
#endif
#endif

#endif
