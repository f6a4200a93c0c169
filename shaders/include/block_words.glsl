// The 32-element block formats (Q8_0, Q4_0, Q4_1) read as a stream of aligned 32-bit words,
// for integer dot products against x rounded to int8 per block of 32 (gemv_dot.comp), or, with
// XW_FLOAT, for fp32 products against x as it is (gemv_words_*, behind the gemv_words tuning key).
//
// A row of these blocks is 4-byte aligned when its byte length is (Q4_1 always; Q8_0 and
// Q4_0, whose 34- and 18-byte blocks are only 2-byte aligned, for an even block count). Each
// word then holds the codes of one block only, beside at most the 2-byte scale of the next
// block or its own: a block's codes start 0 or 2 bytes into a word. So word j of a row meets
// the same elements of x in every row, and gemv_dot.comp writes that pairing once per
// workgroup as a table of XWord entries (uvec4), one per word of a row:
//   .x  int8 x values under the word's 4 bytes (Q8_0) or low nibbles (Q4_*), 0 under scale bytes
//   .y  int8 x values under the high nibbles (Q4_*), else 0
//   .z  x's scale for the word's block (a Q4_1 head word {d, m}: the float sum of the block's x)
//   .w  for Q4_0, the signed correction -8 * (sum of the .x and .y bytes): Q4_0 codes are
//       nibbles n of value n - 8, and the dot products take the raw nibbles.
// A word's block needs no entry: word j's codes belong to block 4 j / W_BLOCK_BYTES of the row.
// With XW_FLOAT an entry is instead {lo, hi: the x values under the low and high nibbles (or
// bytes), scaled as below; meta: a float bias}, in three shared arrays (table_lo, table_hi,
// table_meta). A code becomes a float through its bits, with no conversion and no subtraction
// per code: byte i of a word, shifted to bits 15..22 (the top of the mantissa), ORed into 1.0f
// reads as 1 + byte / 256 (a nibble at 15..18 as 1 + n / 256, one at 19..22 as 1 + n / 16), so
// one shift per byte and one logic op per code precede each FMA. The entry holds x times 256
// (times 16 under high nibbles), so that the products sum to sum(x') + sum(code x); the bias
// takes sum(x') back out, with the formats' offsets (Q4_0's 8, Q8_0's 128 after the sign bit
// is flipped). What that costs in precision: the sums run about 2^5 above the result (a few
// ulps of 2^-24), far inside fp32 accumulation over a row.
// Requires weights.glsl (W_BLOCK_BYTES) and, for the integer entries, GL_EXT_spirv_intrinsics.
#ifndef AKUNU_BLOCK_WORDS_GLSL
#define AKUNU_BLOCK_WORDS_GLSL

#ifndef XW_FLOAT
#include "int_dot.glsl"
#endif

#if defined(WTYPE_Q4_1)
#define W_HEAD_BYTES 4  // {half d; half m}
#else
#define W_HEAD_BYTES 2  // {half d}
#endif
#if defined(WTYPE_Q8_0)
#define W_CODE_WORDS 8  // 32 one-byte codes
#else
#define W_CODE_WORDS 4  // 16 bytes of nibbles: element c low, c + 16 high
#endif

#ifdef XW_FLOAT
struct XEntry {
    vec4 lo, hi;
    float bias;
};
XEntry xw_entry(uint at) {
#if defined(WTYPE_Q8_0)
    return XEntry(table_lo[at], vec4(0.0), table_meta[at]);
#else
    return XEntry(table_lo[at], table_hi[at], table_meta[at]);
#endif
}

// x under 4 codes, as write_block_words passes it around: 4 floats.
#define XQ vec4
XQ xq_zero() { return vec4(0.0); }
// Codes 2 and 3 of `below`, then codes 0 and 1 of `own`: a word that starts 2 bytes into them.
XQ xq_join(XQ below, XQ own) { return vec4(below.zw, own.xy); }
// The entry of a word of codes: x scaled to the codes' place in the mantissa, and the bias that
// removes sum(x') and the format's offset (d, x's scale, is not needed: x is not rounded).
void xw_put(uint j, XQ lo, XQ hi, float d) {
    const float s_lo = dot(lo, vec4(1.0)), s_hi = dot(hi, vec4(1.0));
#if defined(WTYPE_Q8_0)
    XW_STORE(j, 256.0 * lo, hi, -384.0 * s_lo);  // codes read as 1 + (c + 128) / 256
#elif defined(WTYPE_Q4_0)
    XW_STORE(j, 256.0 * lo, 16.0 * hi, -264.0 * s_lo - 24.0 * s_hi);  // nibble n stands for n - 8
#else
    XW_STORE(j, 256.0 * lo, 16.0 * hi, -256.0 * s_lo - 16.0 * s_hi);
#endif
}
// A Q4_1 head word {d, m}: the block's sum of x, for m * sum(x).
void xw_put_head(uint j, float sum) { XW_STORE(j, vec4(0.0), vec4(0.0), sum); }

// Word w's share of its row's dot product: dw is the scale of the word's block in that row.
// Under scale bytes x is 0, so whatever value their bits give is multiplied away.
float word_dot(uint w, XEntry e, float dw, bool head) {
    const uvec4 v = uvec4(w << 15, w << 7, w >> 1, w >> 9);  // byte i at bits 15..22
#if defined(WTYPE_Q8_0)
    const vec4 c = uintBitsToFloat((v & 0x007F8000u) ^ 0x3FC00000u);  // sign bit flipped, into 1.0f
    return dw * (dot(c, e.lo) + e.bias);
#else
#if defined(WTYPE_Q4_1)
    if (head) return unpackHalf2x16(w).y * e.bias;  // m * sum(x)
#endif
    const vec4 lo = uintBitsToFloat((v & 0x00078000u) | 0x3F800000u);
    const vec4 hi = uintBitsToFloat((v & 0x00780000u) | 0x3F800000u);
    return dw * (dot(lo, e.lo) + dot(hi, e.hi) + e.bias);
#endif
}
#else  // integer entries

#define XEntry uvec4
XEntry xw_entry(uint at) { return table[at]; }

// x under 4 codes: 4 int8s packed in a word.
#define XQ uint
XQ xq_zero() { return 0u; }
XQ xq_join(XQ below, XQ own) { return (below >> 16) | (own << 16); }
void xw_put(uint j, XQ lo, XQ hi, float d) {
#if defined(WTYPE_Q4_0)
    const int correction = -8 * (DOT_S8(lo, 0x01010101) + DOT_S8(hi, 0x01010101));
#else
    const int correction = 0;
#endif
    XW_STORE(j, uvec4(lo, hi, floatBitsToUint(d), uint(correction)));
}
void xw_put_head(uint j, float sum) { XW_STORE(j, uvec4(0u, 0u, floatBitsToUint(sum), 0u)); }

// Word w's share of its row's dot product: dw is the scale of the word's block in that row.
float word_dot(uint w, uvec4 e, float dw, bool head) {
#if defined(WTYPE_Q8_0)
    const int s = DOT_S8(w, e.x);
#else
    int s = DOT_S8_U8(e.x, w & 0x0F0F0F0Fu) + DOT_S8_U8(e.y, (w >> 4) & 0x0F0F0F0Fu);
#if defined(WTYPE_Q4_0)
    s += int(e.w);
#endif
#endif
#if defined(WTYPE_Q4_1)
    if (head) return unpackHalf2x16(w).y * uintBitsToFloat(e.z);  // m * sum(x)
#endif
    return float(s) * (dw * uintBitsToFloat(e.z));
}
#endif  // XW_FLOAT

// Writes the entries of block b of a slice (table[j] for the words that hold its codes, and a
// Q4_1 block's head word) from the 8 neighbouring invocations (8-aligned in the subgroup) that
// hold its codes: invocation `part` holds x under codes 4 part .. 4 part + 3 in q (XQ: packed
// int8s, or floats). d is the block's scale of x and sum the float sum of its x. A block's
// codes start on a word or 2 bytes into one (then the first and last words hold scale bytes,
// under which x is 0). Every invocation of the subgroup calls this (shuffles); those with
// live = false write nothing. The includer defines XW_STORE.
void write_block_words(uint b, bool live, XQ q, float d, float sum) {
    const uint part = gl_SubgroupInvocationID & 7u, first = gl_SubgroupInvocationID & ~7u;
    const XQ below = subgroupShuffle(q, first + ((part + 7u) & 7u));  // codes 4 part - 4 ..
#if !defined(WTYPE_Q8_0)
    const XQ high = subgroupShuffle(q, first + ((part + 4u) & 7u));        // codes 16 + 4 part ..
    const XQ high_below = subgroupShuffle(q, first + ((part + 3u) & 7u));  // codes 12 + 4 part ..
#endif
    if (!live) return;
    const uint codes = b * W_BLOCK_BYTES + W_HEAD_BYTES;  // first code byte in the slice's bytes
    const bool shifted = (codes & 3u) != 0;
    const uint j = (codes >> 2) + part;
#if defined(WTYPE_Q4_1)
    if (part == 0) xw_put_head(j - 1, sum);
#endif
#if defined(WTYPE_Q8_0)
    const XQ lo = shifted ? xq_join(part > 0 ? below : xq_zero(), q) : q;
    // The last word of a shifted block: codes 30 and 31, then the next block's scale.
    if (shifted && part == 7) xw_put(j + 1, xq_join(q, xq_zero()), xq_zero(), d);
    xw_put(j, lo, xq_zero(), d);
#else
    if (part > W_CODE_WORDS || (part == W_CODE_WORDS && !shifted)) return;
    const XQ own = part < W_CODE_WORDS ? q : xq_zero(), own_high = part < W_CODE_WORDS ? high : xq_zero();
    const XQ lo = shifted ? xq_join(part > 0 ? below : xq_zero(), own) : own;
    const XQ hi = shifted ? xq_join(part > 0 ? high_below : xq_zero(), own_high) : own_high;
    xw_put(j, lo, hi, d);
#endif
}


#endif
