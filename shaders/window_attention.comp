#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
// window_attention: non-causal attention inside windows of rows (params.h
// WindowAttentionParams), one pass over the window's keys with an online softmax.
//
// Workgroup = (window, tile of p.tile_rows query rows, head). Each query row has a team of TEAM
// neighbouring invocations inside one subgroup; lane `lane` of a team owns the vec4 slots lane,
// lane + TEAM, ... of q and of the output (so a team's reads of a staged row are contiguous and
// the teams of a subgroup read the same row: no bank conflicts). K and V of the window come in
// blocks of rows staged in shared memory as f32, read once per tile instead of once per row. A
// team scores TEAM keys at a time and reduces each lane's TEAM partial sums in one transposing
// pass (TEAM - 1 shuffles for TEAM keys), as flash_attention.comp does.
#include "common.glsl"

layout(local_size_x_id = 0) in;  // tile_rows * TEAM
layout(constant_id = 1) const uint TEAM = 8;  // a power of two, at most 8
layout(constant_id = 2) const uint VECS = 2;  // head_dim / (4 TEAM): vec4 slots per lane
layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [rows, q_stride]
layout(std430, binding = 1) readonly buffer Kv { float kv[]; };        // [rows, kv_stride]
layout(std430, binding = 2) readonly buffer Step { StepState step; };
layout(std430, binding = 3) writeonly buffer Out { float out_data[]; };  // [rows, out_stride]
layout(push_constant) uniform Push { WindowAttentionParams p; };

shared vec4 k_tile[AKUNU_WINDOW_TILE_VEC4];  // [block keys, head_dim / 4]
shared vec4 v_tile[AKUNU_WINDOW_TILE_VEC4];

vec4 load4(uint at) { return vec4(kv[at], kv[at + 1], kv[at + 2], kv[at + 3]); }

// Stages K and V of window rows [key0, key0 + count) of head h.
void stage(uint key0, uint count, uint h, uint slots) {
    for (uint e = gl_LocalInvocationID.x; e < count * slots; e += gl_WorkGroupSize.x) {
        const uint at = (key0 + e / slots) * p.a.kv_stride + h * p.a.head_dim + 4 * (e % slots);
        k_tile[e] = load4(at + p.a.k_offset);
        v_tile[e] = load4(at + p.a.v_offset);
    }
}

void main() {
    const uint n = min(p.a.rows, step.n_tokens), heads = p.a.n_heads;
    const uint tiles = (p.window + p.tile_rows - 1) / p.tile_rows, gid = linear_group_id();
    const uint h = gid % heads, tile = (gid / heads) % tiles, first = (gid / (heads * tiles)) * p.window;
    if (first >= n) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x, lane = tid % TEAM;
    const uint team_base = gl_SubgroupInvocationID & ~(TEAM - 1u);  // the team's first lane
    const uint r = tile * p.tile_rows + tid / TEAM, row = first + r;
    const bool live = r < p.window && row < n;
    const uint slots = TEAM * VECS;  // vec4s per row: head_dim / 4

    vec4 qv[VECS], o[VECS];
    [[unroll]] for (uint c = 0; c < VECS; ++c) {
        const uint at = row * p.a.q_stride + h * p.a.head_dim + 4 * (lane + TEAM * c);
        qv[c] = live ? vec4(q[at], q[at + 1], q[at + 2], q[at + 3]) * p.a.scale : vec4(0.0);
        o[c] = vec4(0.0);
    }
    // The running max is the team's; the running sum of weights is this lane's share (its own
    // keys), summed over the team at the end.
    float m = -1.0 / 0.0, l = 0.0;
    const uint block = AKUNU_WINDOW_TILE_VEC4 / slots;
    for (uint t0 = 0; t0 < p.window; t0 += block) {
        const uint count = min(block, p.window - t0);
        stage(first + t0, count, h, slots);
        barrier();
        for (uint j0 = 0; j0 < count; j0 += TEAM) {
            float part[TEAM];
            [[unroll]] for (uint j = 0; j < TEAM; ++j) {
                const uint kb = min(j0 + j, count - 1) * slots + lane;  // past count: a staged row, masked below
                float d = 0.0;
                [[unroll]] for (uint c = 0; c < VECS; ++c) d += dot(qv[c], k_tile[kb + TEAM * c]);
                part[j] = d;
            }
            [[unroll]] for (uint half_n = TEAM / 2; half_n >= 1; half_n /= 2) {
                const bool upper = (lane & half_n) != 0;
                [[unroll]] for (uint j = 0; j < half_n; ++j) {
                    const float keep = upper ? part[j + half_n] : part[j];
                    const float send = upper ? part[j] : part[j + half_n];
                    part[j] = keep + subgroupShuffleXor(send, half_n);
                }
            }
            // Lane j now holds the score of key j0 + j.
            const float s = live && j0 + lane < count ? part[0] : -1.0 / 0.0;
            float group_max = s;
            [[unroll]] for (uint w = TEAM / 2; w >= 1; w /= 2) group_max = max(group_max, subgroupShuffleXor(group_max, w));
            const float m_new = max(m, group_max);
            // With no visible key yet (m_new = -inf) every weight and correction is 0.
            const float m_ref = m_new > -1.0 / 0.0 ? m_new : 0.0;
            const float correction = exp(m - m_ref), w = exp(s - m_ref);
            m = m_new;
            l = l * correction + w;
            [[unroll]] for (uint c = 0; c < VECS; ++c) o[c] *= correction;
            const uint group = min(TEAM, count - j0);  // uniform
            for (uint g = 0; g < group; ++g) {
                const float wg = subgroupShuffle(w, team_base + g);
                const uint vb = (j0 + g) * slots + lane;
                [[unroll]] for (uint c = 0; c < VECS; ++c) o[c] += wg * v_tile[vb + TEAM * c];
            }
        }
        barrier();  // the block has been read
    }
    [[unroll]] for (uint w = TEAM / 2; w >= 1; w /= 2) l += subgroupShuffleXor(l, w);
    if (live)
        [[unroll]] for (uint c = 0; c < VECS; ++c) {
            const uint at = row * p.a.out_stride + h * p.a.head_dim + 4 * (lane + TEAM * c);
            [[unroll]] for (uint k = 0; k < 4; ++k) out_data[at + k] = o[c][k] / l;
        }
}
