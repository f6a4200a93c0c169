// The 32-element block formats (Q8_0, Q4_0, Q4_1) read as a stream of aligned 32-bit words,
// for integer dot products against x rounded to int8 per block of 32 (gemv_dot.comp).
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
// Requires weights.glsl (W_BLOCK_BYTES) and GL_EXT_spirv_intrinsics.
#ifndef AKUNU_BLOCK_WORDS_GLSL
#define AKUNU_BLOCK_WORDS_GLSL

#include "int_dot.glsl"

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
