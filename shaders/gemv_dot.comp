#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require  // integer dot products: block_words.glsl
// gemv_dot_<wtype>: y[r] = dot(W[r, :], x) for the 32-element block formats (Q8_0, Q4_0, Q4_1)
// with integer dot products, on devices that have them.
//
// The float GEMV reads 4 bytes of x per weight and multiplies in fp32 after converting each
// code: for 4-bit weights that is 7 bytes of x traffic and several instructions per byte of
// weights. Here each workgroup rounds x to int8 per block of 32 once (scale max|x| / 127, as
// llama.cpp's q8_1) into a shared table that pairs every 32-bit word of a row with the x
// values under its codes (block_words.glsl), so a weight word costs one or two packed dot
// products against one shared-memory entry, and an entry serves SG_ROWS rows at once.
// Weights stream as 16-byte chunks, neighbouring invocations reading neighbouring chunks of a
// row; each subgroup owns SG_ROWS rows and sums them with subgroupAdd alone. The first chunks
// are loaded before the table is built, so their memory latency overlaps that work.
//
// Needs rows of a multiple of 256 elements (16-byte aligned rows, kernels.cpp checks). k runs
// in slices of SLICE elements, each with its own table.
#include "common.glsl"
#include "activation.glsl"
#extension GL_KHR_shader_subgroup_shuffle : require

layout(std430, binding = 1) readonly buffer Xv { vec4 x4[]; };  // [k/4]
layout(std430, binding = 3) readonly buffer Gv { vec4 g4[]; };  // [k/4] g: the norm weight or up (x_op)
layout(std430, binding = 2) buffer Y { float y[]; };            // [rows]
layout(push_constant) uniform Push { GemvParams p; };
#define W_BINDING 0
#include "weights.glsl"
layout(std430, binding = W_BINDING) readonly buffer Wq { uvec4 wq[]; };  // W as 16-byte chunks

layout(local_size_x_id = 0) in;               // workgroup size: specialization constant 0
layout(constant_id = 1) const uint ROWS = 8;  // rows per workgroup
// SG_ROWS | CHUNKS << 8: the rows a subgroup reads side by side and the 16-byte chunks of each
// that an invocation loads before using them (loads in flight).
layout(constant_id = 2) const uint SHAPE = 0x0402;
layout(constant_id = 3) const uint SLICE = 4096;  // elements of x per table, a multiple of 256
const uint SG_ROWS = SHAPE & 0xFFu;
const uint CHUNKS = (SHAPE >> 8) & 0xFFu;
#define MAX_SUBGROUPS 128
// vec4s of x each invocation rounds per slice (kernels.cpp keeps it at 16 or fewer: registers)
const uint X_PASSES = (SLICE / 4 + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;

// The table: an XWord per word of a row's slice, in 4 planes (word 4c + t at plane t, index c)
// so that neighbouring invocations, which read neighbouring 16-byte chunks, read neighbouring
// entries (no bank conflicts). A plane is one entry longer than a slice's chunks, so that the
// 8 invocations writing a block's consecutive words do not all meet in one bank.
const uint PLANE = SLICE / 32 * W_BLOCK_BYTES / 16 + 1;
shared uvec4 table[4 * PLANE];
#define XW_STORE(j, entry) table[((j) & 3u) * PLANE + ((j) >> 2)] = (entry)
shared float sum_sq_partial[MAX_SUBGROUPS];
#include "block_words.glsl"

// Rounds x[first : first + n] (as x_op forms it: normed through g, or gated by it) to int8 per block
// of 32 and writes the slice's table. Neighbouring invocations read neighbouring vec4s of x, 8
// to a block. Returns this invocation's share of sum(x^2).
float write_table(uint first, uint n) {
    const uint self = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    // Every load first, so that their latencies overlap.
    vec4 v[X_PASSES];
    float sum_sq = 0.0;
    for (uint pass = 0; pass < X_PASSES; ++pass) {
        const uint i = pass * gl_WorkGroupSize.x + self;  // vec4 of the slice
        v[pass] = vec4(0.0);
        if (i < n / 4) {
            const vec4 xv = x4[first / 4 + i];
            sum_sq += dot(xv, xv);
            v[pass] = p.x_op == AKUNU_GEMV_X ? xv : gemv_x_op(p.x_op, xv, g4[first / 4 + i], p.weight_offset);
        }
    }
    for (uint pass = 0; pass < X_PASSES; ++pass) {
        const uint i = pass * gl_WorkGroupSize.x + self;
        const vec4 a = abs(v[pass]);
        float amax = max(max(a.x, a.y), max(a.z, a.w)), sum = dot(v[pass], vec4(1.0));
        for (uint m = 1; m < 8; m <<= 1) {
            amax = max(amax, subgroupShuffleXor(amax, m));
            sum += subgroupShuffleXor(sum, m);
        }
        const ivec4 c = ivec4(roundEven(v[pass] * (amax > 0.0 ? 127.0 / amax : 0.0))) & 255;
        write_block_words(i / 8, i < n / 4, uint(c.x | (c.y << 8) | (c.z << 16) | (c.w << 24)), amax / 127.0, sum);
    }
    return sum_sq;
}

// Loads W[row0 + r, slice chunk c] into dst[i][r] for this invocation's chunks of pass `pass`:
// c = (pass * CHUNKS + i) * lanes + lane (main's registers; a macro, so that no copy of them is made).
#define LOAD_CHUNKS(dst, slice_chunk, chunks, pass)                                                     \
    for (uint i = 0; i < CHUNKS; ++i) {                                                                 \
        const uint c = ((pass) * CHUNKS + i) * gl_SubgroupSize + gl_SubgroupInvocationID;               \
        for (uint r = 0; r < SG_ROWS; ++r)                                                              \
            dst[i][r] = c < (chunks) && r < rows_here ? wq[(row0 + r) * row_chunks + (slice_chunk) + c] : uvec4(0u); \
    }

// 16-byte chunks of a row in the slice that starts at element `first`.
uint slice_chunks(uint first) { return min(SLICE, p.k - first) / 32 * W_BLOCK_BYTES / 16; }

void main() {
    const uint row_bytes = p.k / 32 * W_BLOCK_BYTES, row_chunks = row_bytes / 16;
    const uint group_first = linear_group_id() * ROWS, group_end = min(group_first + ROWS, p.rows);
    // One pass of this loop unless the device runs fewer subgroups than the launcher planned
    // for (the trip count is the same for the whole workgroup, so the barriers stay uniform).
    for (uint base = group_first; base < group_end; base += gl_NumSubgroups * SG_ROWS) {
        const uint row0 = base + gl_SubgroupID * SG_ROWS;
        const uint rows_here = row0 < group_end ? min(SG_ROWS, group_end - row0) : 0;
        float acc[SG_ROWS];
        for (uint r = 0; r < SG_ROWS; ++r) acc[r] = 0.0;
        float sum_sq = 0.0;
        // The chunks of the pass being multiplied. A slice's first chunks load before its table
        // is written, overlapping that work.
        uvec4 w[CHUNKS][SG_ROWS];
        LOAD_CHUNKS(w, 0, slice_chunks(0), 0);
        for (uint first = 0; first < p.k; first += SLICE) {
            const uint n = min(SLICE, p.k - first), blocks = n / 32;
            const uint chunks = slice_chunks(first), slice_chunk = first / 32 * W_BLOCK_BYTES / 16;
            barrier();  // every invocation is done with the previous slice's table
            sum_sq += write_table(first, n);
            barrier();
            const uint next = first + SLICE;
            for (uint pass = 0; pass * CHUNKS * gl_SubgroupSize < chunks; ++pass) {
                const bool more = (pass + 1) * CHUNKS * gl_SubgroupSize < chunks;
                if (pass > 0) LOAD_CHUNKS(w, slice_chunk, chunks, pass);
                for (uint i = 0; i < CHUNKS; ++i) {
                    const uint c = (pass * CHUNKS + i) * gl_SubgroupSize + gl_SubgroupInvocationID;
                    if (c >= chunks) break;
                    const XEntry e0 = xw_entry(c), e1 = xw_entry(PLANE + c), e2 = xw_entry(2 * PLANE + c), e3 = xw_entry(3 * PLANE + c);
                    // A chunk's 16 bytes hold codes of two blocks at most: the first word's and
                    // the next. Word j's codes belong to block 4 j / W_BLOCK_BYTES (block_words.glsl).
                    const uint block_a = 16 * c / W_BLOCK_BYTES, block_b = min(block_a + 1, blocks - 1);
                    const bvec3 in_a = equal(uvec3(16 * c + 4, 16 * c + 8, 16 * c + 12) / W_BLOCK_BYTES, uvec3(block_a));
#if defined(WTYPE_Q4_1)
                    const bvec4 head = equal((16 * c + uvec4(0, 4, 8, 12)) % W_BLOCK_BYTES, uvec4(0));
#else
                    const bvec4 head = bvec4(false);
#endif
                    for (uint r = 0; r < SG_ROWS; ++r) {
                        if (r >= rows_here) break;
                        const uint half_words = ((row0 + r) * row_bytes + first / 32 * W_BLOCK_BYTES) / 2;
                        const float da = w_half_word(half_words + block_a * (W_BLOCK_BYTES / 2));
                        const float db = w_half_word(half_words + block_b * (W_BLOCK_BYTES / 2));
                        acc[r] += word_dot(w[i][r].x, e0, da, head.x) +
                                  word_dot(w[i][r].y, e1, in_a.x ? da : db, head.y) +
                                  word_dot(w[i][r].z, e2, in_a.y ? da : db, head.z) +
                                  word_dot(w[i][r].w, e3, in_a.z ? da : db, head.w);
                    }
                }
                if (!more && next < p.k) LOAD_CHUNKS(w, next / 32 * W_BLOCK_BYTES / 16, slice_chunks(next), 0);
            }
        }
        float scale = 1.0;
        if (p.x_op == AKUNU_GEMV_RMSNORM) {
            sum_sq = subgroupAdd(sum_sq);
            if (subgroupElect()) sum_sq_partial[gl_SubgroupID] = sum_sq;
            barrier();
            float total = 0.0;
            for (uint s = 0; s < gl_NumSubgroups; ++s) total += sum_sq_partial[s];
            scale = inversesqrt(total / float(p.k) + p.eps);
        }
        for (uint r = 0; r < SG_ROWS; ++r) {
            const float total = subgroupAdd(acc[r]) * scale;
            if (subgroupElect() && r < rows_here) {
                const uint row = row0 + r;
                y[row] = p.accumulate != 0 ? y[row] + total : total;
            }
        }
    }
}
