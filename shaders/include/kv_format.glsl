// The KV-cache storage formats. Without K_FORMAT/V_FORMAT defines the cache holds f16 values;
// with them (KV_F16 = 0 is not among them: both sides are quantized), each (head, position) row
// of head_dim values is packed into 32-bit words with one f16 scale per row, and a value is
// code * scale:
//
//   KV_Q8 (1)    int8 codes in [-127, 127], 4 per word,   scale = max|row| / 127
//   KV_INT4 (2)  int4 codes in [-8, 7],      8 per word,  scale = max|row| / 7
//   KV_FP4 (3)   E2M1 codes (sign, 2-bit exponent, 1-bit mantissa: 0, 0.5, 1, 1.5, 2, 3, 4, 6),
//                8 per word,                              scale = max|row| / 6
//
// K and V may use different formats (q8 keys, 4-bit values). The int4h cache holds KV_INT4
// rows of Hadamard-rotated K and V (kv_format.h); its readers are int4's. Value j of a word sits in bits
// [j * bits, (j + 1) * bits). The scale is rounded to f16 first and the codes are formed with
// that rounded scale, so code * scale is what was meant. A row of zeros has scale 0 and codes
// 0. Readers dequantize in registers; nothing ever holds an f16 copy of a quantized cache.
// Format arguments are compile-time constants where it matters, so the branches fold away.
#ifndef AKUNU_KV_FORMAT_GLSL
#define AKUNU_KV_FORMAT_GLSL

// x rounded to the nearest half (ties to even), as an f32: what a half stores. Formed from the
// float's bits, so that a compiler that keeps halves in 32-bit registers cannot skip the
// rounding (bench/NOTES.md, "Decode attention packs the step's own row"). Subnormal halves are
// steps of 2^-24; past the largest half (and for NaN) the conversion gives inf or NaN, as a
// store would.
float f16_round(float x) {
    const float a = abs(x);
    if (!(a < 65520.0)) return float(float16_t(x));
    if (a < 6.103515625e-05) return roundEven(x * 16777216.0) / 16777216.0;
    const uint u = floatBitsToUint(x);
    return uintBitsToFloat((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}

#define KV_Q8 1u
#define KV_INT4 2u
#define KV_FP4 3u

#if defined(K_FORMAT) && defined(V_FORMAT)
#define KV_QUANTIZED 1
#define KV_BITS(f) ((f) == KV_Q8 ? 8u : 4u)
#define KV_PER_WORD(f) (32u / KV_BITS(f))

float kv_qmax(uint f) { return f == KV_Q8 ? 127.0 : f == KV_INT4 ? 7.0 : 6.0; }

// The value of code j of `word`, before scaling. An fp4 magnitude's exponent and mantissa bits go
// into an f32's, whose exponent is offset so that e = 1..3 give (1 + m/2) 2^(e - 1), with the
// subnormals 0 and 0.5 selected: exact, and faster in decode attention than forming it from
// conversions (bench/NOTES.md, "Quantized decode attention 8 bytes a lane").
float kv_code(uint word, uint j, uint f) {
    if (f == KV_FP4) {
        const uint c = bitfieldExtract(word, int(j * 4u), 4), k = c & 7u;
        const float mag = k < 2u ? 0.5 * float(k == 1u) : uintBitsToFloat((k << 22) + 0x3F000000u);
        return (c & 8u) != 0u ? -mag : mag;
    }
    return float(bitfieldExtract(int(word), int(j * KV_BITS(f)), int(KV_BITS(f))));
}

// The code bits of y = value / scale, in the low KV_BITS(f) bits.
uint kv_encode(float y, uint f) {
    if (f == KV_FP4) {
        // Nearest magnitude; a tie goes to the smaller one (thresholds are the midpoints).
        const float a = abs(y);
        const uint c = uint(a > 0.25) + uint(a > 0.75) + uint(a > 1.25) + uint(a > 1.75) + uint(a > 2.5) +
                       uint(a > 3.5) + uint(a > 5.0);
        return y < 0.0 ? c | 8u : c;
    }
    if (f == KV_INT4) return uint(int(clamp(roundEven(y), -8.0, 7.0))) & 0xFu;
    return uint(int(clamp(roundEven(y), -127.0, 127.0))) & 0xFFu;
}

#endif  // quantized formats
#endif
