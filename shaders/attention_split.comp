#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
// attention_split: one workgroup per (query head, chunk of cache rows). The workgroup scores
// the chunk's rows, forms their max and sum of exps and the exp-weighted V sum, and writes
// them as a partial [head_dim | max | sum] for attention_merge. With K_FORMAT/V_FORMAT it reads
// a quantized cache (kv_format.glsl), dequantizing in registers; with KV_RING or KV_BLOCKS a
// ring or a cache in blocks (kv_rows.glsl).
#include "common.glsl"
#define KV_HEAD_DIM p.head_dim
#define KV_ROWS p.cache_rows
#define KV_HEADS p.n_kv_heads
#include "kv_cache_read.glsl"
#include "reduce.glsl"

layout(local_size_x = AKUNU_ATTENTION_CHUNK) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };              // [n_heads, head_dim]
layout(std430, binding = 3) writeonly buffer P { float partial[]; };       // [n_heads, n_chunks, head_dim + 2]
layout(std430, binding = 4) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { AttentionParams p; };

shared float weight[AKUNU_ATTENTION_CHUNK];

void main() {
    const uint h = gl_WorkGroupID.x, chunk = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint kvh = h / (p.n_heads / p.n_kv_heads);
    const uint pos = step.pos;
    const uint first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const uint begin = chunk * AKUNU_ATTENTION_CHUNK;
    // Chunks outside the attended rows write nothing; attention_merge does not read them.
    if (begin > pos || begin + AKUNU_ATTENTION_CHUNK <= first) return;  // uniform
    // Scores: teams of 8 neighbouring invocations share a cache row, lane l reading dims
    // l, l + 8, ... so that a team's loads of the row are contiguous; 32 teams cover 32 rows
    // per pass, and three shuffles sum a team's products.
    const uint lane = tid % 8, team = tid / 8;
    const uint qb = h * p.head_dim;
    for (uint r = team; r < AKUNU_ATTENTION_CHUNK; r += gl_WorkGroupSize.x / 8) {
        const uint t = begin + r;
        float d = 0.0;
        if (t <= pos && t < p.max_len) {
            const kv_row_t kr = KV_ROW(kvh, t);
            for (uint i = lane; i < p.head_dim; i += 8) d += q[qb + i] * K_AT(kr, i);
            d *= K_SCALE(kr);
        }
        d += subgroupShuffleXor(d, 4);
        d += subgroupShuffleXor(d, 2);
        d += subgroupShuffleXor(d, 1);
        if (lane == 0) {
            d *= p.scale;
            if (p.softcap > 0.0) d = p.softcap * tanh(d / p.softcap);
            weight[r] = t >= first && t <= pos ? d : -1.0 / 0.0;
        }
    }
    barrier();
    const float s = weight[tid];
    const bool valid = s > -1.0 / 0.0;
    const float m = workgroup_max(s);
    const float e = valid ? exp(s - m) : 0.0;
    const float l = workgroup_sum(e);
    // The V rows' scales ride on the weights (1 for an f16 cache). Rows past pos are read but
    // masked: in a cache of blocks they lie in the block of an attended row (chunk = block).
    weight[tid] = valid ? e * V_SCALE(KV_ROW(kvh, begin + tid)) : 0.0;
    barrier();

    // Weighted V: invocation tid takes dim tid % head_dim of every (256 / head_dim)-th row,
    // so all 256 invocations work; the row groups are summed through shared memory.
    const uint slot = (h * p.n_chunks + chunk) * (p.head_dim + 2);
    const uint rows = min(AKUNU_ATTENTION_CHUNK, pos + 1 - begin);
    const uint groups = gl_WorkGroupSize.x / p.head_dim, dim = tid % p.head_dim, group = tid / p.head_dim;
    float acc = 0.0;
    if (group < groups)
        for (uint j = group; j < rows; j += groups) acc += weight[j] * V_AT(KV_ROW(kvh, begin + j), dim);
    barrier();  // every weight has been read
    weight[tid] = acc;
    barrier();
    if (tid < p.head_dim) {
        float total = 0.0;
        for (uint g = 0; g < groups; ++g) total += weight[g * p.head_dim + tid];
        partial[slot + tid] = total;
    }
    if (tid == 0) {
        partial[slot + p.head_dim] = m;
        partial[slot + p.head_dim + 1] = l;
    }
}
