#version 450
#extension GL_GOOGLE_include_directive : require
// sample: the next token from one row of logits, on the GPU, so that a chain's next step can
// embed it without the CPU. One workgroup per row.
//
// Greedy (temperature 0): the argmax, lowest index on ties. Otherwise z = logits / T is
// filtered in the order temperature, top-k, top-p, min-p (each filter keeps ties at its
// threshold), and the token is argmax(z_i + g_i) over the survivors, where g_i is Gumbel noise
// from a counter-based RNG (Philox4x32-10) keyed by the seed and counted by (token index,
// position). A draw therefore depends on (seed, position, logits) only: the same seed gives
// the same text whether the chain is 1 or 64 steps long.
//
// Thresholds are found without sorting: on the order-preserving integer key of z, a 4-bit
// digit per pass, each pass counting (or summing the probability mass of) the keys at or above
// 16 candidate thresholds at once; 8 passes give the exact k-th largest key.
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };       // [rows, n]
layout(std430, binding = 1) buffer Ids { uint token_ids[]; };
layout(std430, binding = 2) buffer Lp { float logprobs[]; };             // beside token_ids
#ifdef SAMPLE_BATCH
// A batched step (params.h BatchRow): row r samples with its sequence's sampler, keyed by the
// row's position + 1, the position of the token it draws, as a single sequence's step does.
layout(std430, binding = 3) readonly buffer Step { StepState step; BatchRow batch_rows[]; };
layout(std430, binding = 4) readonly buffer S { SamplerState samplers[]; };  // [sequences]
// Rows with a target (targets[r] < n, else AKUNU_NO_TARGET) also score it: its log-probability
// under the raw logits and whether it is the row's argmax, so that scoring reads no logits on
// the host.
layout(std430, binding = 5) buffer Sc { float target_logprobs[]; };    // [rows]
layout(std430, binding = 6) buffer Gr { uint target_is_argmax[]; };    // [rows]
layout(std430, binding = 7) readonly buffer Tg { uint targets[]; };    // [rows]
#define cfg samplers[batch_rows[gl_WorkGroupID.x].seq]
#define DRAW_POSITION(row) (batch_rows[row].pos + 1u)
#else
layout(std430, binding = 3) readonly buffer Step { StepState step; };
layout(std430, binding = 4) readonly buffer S { SamplerState cfg; };
#define DRAW_POSITION(row) (step.pos + step.n_tokens + (row))
#endif
layout(push_constant) uniform Push { SampleParams p; };

shared float digit_partial[16][AKUNU_MAX_SUBGROUPS];
shared float digit_sums[16];
shared float best_score[AKUNU_MAX_SUBGROUPS];
shared uint best_index[AKUNU_MAX_SUBGROUPS];

// The largest score over the workgroup and its lowest index (every invocation gets both).
void workgroup_argmax(inout float score, inout uint index) {
    const float m = subgroupMax(score);
    const uint i = subgroupMin(score == m ? index : 0xFFFFFFFFu);
    if (subgroupElect()) {
        best_score[gl_SubgroupID] = m;
        best_index[gl_SubgroupID] = i;
    }
    barrier();
    score = -1.0 / 0.0;
    index = 0xFFFFFFFFu;
    for (uint s = 0; s < gl_NumSubgroups; ++s)
        if (best_score[s] > score || (best_score[s] == score && best_index[s] < index)) {
            score = best_score[s];
            index = best_index[s];
        }
    barrier();
}

// Order-preserving map of floats to uints: a < b exactly when key(a) < key(b).
uint key(float f) {
    const uint b = floatBitsToUint(f);
    return (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
}

uvec4 philox(uvec4 ctr, uvec2 k) {
    for (uint r = 0; r < 10; ++r) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, ctr.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, ctr.z, hi1, lo1);
        ctr = uvec4(hi1 ^ ctr.y ^ k.x, lo1, hi0 ^ ctr.w ^ k.y, lo0);
        k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return ctr;
}

// Gumbel(0, 1) noise for token i at `position`: -log(-log(u)) with u uniform in (0, 1).
float gumbel(uint i, uint position) {
    const uint bits = philox(uvec4(i, position, 0u, 0u), uvec2(cfg.seed_lo, cfg.seed_hi)).x;
    const float u = (float(bits >> 8) + 0.5) * (1.0 / 16777216.0);
    return -log(-log(u));
}

uint row_base;
float z(uint i) { return logits[row_base + i] / cfg.temperature; }

// The largest key t (to 4-bit digits from the top) with measure(t) >= target, where measure
// counts (mass = false) or sums exp(z - zmax) (mass = true) over keys >= max(t, floor_key).
// measure(floor_key) >= target must hold; the result is then >= floor_key.
uint select_threshold(bool mass, float target, float zmax, uint floor_key) {
    uint prefix = 0;
    for (int shift = 28; shift >= 0; shift -= 4) {
        float acc[16];
        for (uint j = 0; j < 16; ++j) acc[j] = 0.0;
        for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x) {
            const float v = z(i);
            const uint kv = key(v);
            if (kv < floor_key || kv < prefix) continue;
            const float w = mass ? exp(v - zmax) : 1.0;
            // Candidates j: prefix | j << shift; kv reaches the ones whose digit is <= its own
            // (or all of them when its higher digits already exceed the prefix's).
            const uint top = (kv >> shift) >> 4 == prefix >> shift >> 4 ? (kv >> shift) & 15u : 15u;
            for (uint j = 0; j < 16; ++j) acc[j] += j <= top ? w : 0.0;
        }
        // All 16 sums in one reduction: per subgroup, then invocation j sums column j.
        for (uint j = 0; j < 16; ++j) {
            const float v = subgroupAdd(acc[j]);
            if (subgroupElect()) digit_partial[j][gl_SubgroupID] = v;
        }
        barrier();
        if (gl_LocalInvocationID.x < 16) {
            float total = 0.0;
            for (uint sg = 0; sg < gl_NumSubgroups; ++sg) total += digit_partial[gl_LocalInvocationID.x][sg];
            digit_sums[gl_LocalInvocationID.x] = total;
        }
        barrier();
        uint best = 0;
        for (uint j = 1; j < 16; ++j)
            if (digit_sums[j] >= target) best = j;
        barrier();
        prefix |= best << shift;
    }
    return prefix;
}

void main() {
    const uint row = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
#ifdef SAMPLE_BATCH
    if (row >= step.n_tokens) return;  // uniform across the workgroup
#endif
    row_base = row * p.n;
    const uint slot = p.out_slot + row;

    // The raw distribution: max, argmax and log-sum-exp (for the logprob of the chosen token).
    float best = -1.0 / 0.0;
    uint best_i = 0xFFFFFFFFu;
    for (uint i = tid; i < p.n; i += gl_WorkGroupSize.x) {
        const float v = logits[row_base + i];
        if (v > best) {
            best = v;
            best_i = i;
        }
    }
    workgroup_argmax(best, best_i);
    const float lmax = best;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += gl_WorkGroupSize.x) sum += exp(logits[row_base + i] - lmax);
    const float log_z = lmax + log(workgroup_sum(sum));

    uint chosen = best_i;
    if (cfg.temperature > 0.0) {
        const float zmax = lmax / cfg.temperature;
        uint floor_key = 0;
        if (cfg.top_k > 0 && cfg.top_k < p.n) floor_key = select_threshold(false, float(cfg.top_k), zmax, 0);
        if (cfg.top_p < 1.0) {
            float kept = 0.0;
            for (uint i = tid; i < p.n; i += gl_WorkGroupSize.x) {
                const float v = z(i);
                if (key(v) >= floor_key) kept += exp(v - zmax);
            }
            const float target = cfg.top_p * workgroup_sum(kept);
            floor_key = select_threshold(true, target, zmax, floor_key);
        }
        // min-p: p_i >= min_p * p_max, i.e. z_i >= zmax + log(min_p).
        if (cfg.min_p > 0.0) floor_key = max(floor_key, key(zmax + log(cfg.min_p)));

        const uint position = DRAW_POSITION(row);
        float score = -1.0 / 0.0;
        uint index = 0xFFFFFFFFu;
        for (uint i = tid; i < p.n; i += gl_WorkGroupSize.x) {
            const float v = z(i);
            if (key(v) < floor_key) continue;
            const float s = v + gumbel(i, position);
            if (s > score) {
                score = s;
                index = i;
            }
        }
        workgroup_argmax(score, index);
        chosen = index;
    }
    if (tid == 0) {
        chosen = min(chosen, p.n - 1);  // only when every logit is -inf or NaN
        token_ids[slot] = chosen;
        logprobs[slot] = logits[row_base + chosen] - log_z;
#ifdef SAMPLE_BATCH
        const uint target = targets[row];
        if (target < p.n) {
            target_logprobs[row] = logits[row_base + target] - log_z;
            target_is_argmax[row] = best_i == target ? 1u : 0u;
        }
#endif
    }
}
