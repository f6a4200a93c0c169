// attention_split.comp's ends: the merge of a head's chunk partials by the last workgroup of the
// head to finish, and the inverse rotation of a rotated cache's output (UNROTATE). Included
// after the kernel's bindings, shared arrays (weight, head_out) and its reductions.
#ifndef AKUNU_ATTENTION_SPLIT_MERGE_GLSL
#define AKUNU_ATTENTION_SPLIT_MERGE_GLSL

#define HADAMARD_ROW head_out
#include "hadamard_shared.glsl"

// The head's output from head_out into out, multiplied by the orthonormal Walsh-Hadamard matrix
// of size UNROTATE (its own inverse), as hadamard_rows.comp does it. The whole workgroup calls it.
void write_unrotated() {
    const uint tid = gl_LocalInvocationID.x;
    hadamard_butterflies(p.head_dim, UNROTATE, tid, gl_WorkGroupSize.x);
    const float norm = inversesqrt(float(UNROTATE));
    for (uint i = tid; i < p.head_dim; i += gl_WorkGroupSize.x) out_data[out_at + i] = head_out[i] * norm;
}

// out[h] = sum_c acc_c exp(m_c - M) / sum_c l_c exp(m_c - M) over chunks [c_begin, c_end), by
// the whole workgroup, in windows of MERGE_WINDOW chunks: invocation i holds chunk i of a
// window's maximum and sum, and `parts` neighbouring invocations per dim each sum every
// parts-th chunk. The partials are coherent reads from L2, so the merge is a chain of round
// trips at the end of the dispatch: every load that does not wait on M (the first window's
// maxima, sums and MERGE_VALUES values per invocation) is issued at once, so that a head of
// up to MERGE_WINDOW chunks merges after one round trip instead of four; further windows (past
// 64 Ki rows) reload theirs. (A separate merge dispatch, one more dependent dispatch per layer,
// was slower: bench/NOTES.md, the attention merge in the split.)
#ifndef MERGE_WINDOW
#define MERGE_WINDOW AKUNU_ATTENTION_CHUNK
#endif
#define MERGE_VALUES 8
float chunk_factor(float m, float l, float M) { return l > 0.0 ? exp(m - M) : 0.0; }

void merge(uint c_begin, uint c_end) {
    const uint tid = gl_LocalInvocationID.x, stride = p.head_dim + 2, base = unit * p.n_chunks * stride;
    const uint n = c_end - c_begin, first_n = min(n, MERGE_WINDOW);
    uint parts = 1;  // a power of two, inside one subgroup
    while (parts * 2 * p.head_dim <= gl_WorkGroupSize.x && parts * 2 <= gl_SubgroupSize) parts *= 2;
    const uint dim = tid / parts, part = tid % parts;
    const uint at = base + c_begin * stride + min(dim, p.head_dim - 1);  // idle invocations read dim 0's

    // One round trip: chunk tid's maximum and sum, and this invocation's first values.
    const uint own = c_begin + min(tid, first_n - 1);
    const float m0 = partial[base + own * stride + p.head_dim], l0 = tid < first_n ? partial[base + own * stride + p.head_dim + 1] : 0.0;
    float v[MERGE_VALUES];
    [[unroll]] for (uint i = 0; i < MERGE_VALUES; ++i) v[i] = partial[at + min(part + i * parts, first_n - 1) * stride];

    float m = l0 > 0.0 ? m0 : -1.0 / 0.0;
    for (uint c = c_begin + MERGE_WINDOW + tid; c < c_end; c += MERGE_WINDOW)
        if (tid < MERGE_WINDOW && partial[base + c * stride + p.head_dim + 1] > 0.0) m = max(m, partial[base + c * stride + p.head_dim]);
    const float M = workgroup_max(m);
    const float f0 = chunk_factor(m0, l0, M);
    float l = l0 * f0;
    for (uint c = c_begin + MERGE_WINDOW + tid; c < c_end; c += MERGE_WINDOW)
        if (tid < MERGE_WINDOW) {
            const float lc = partial[base + c * stride + p.head_dim + 1];
            l += lc * chunk_factor(partial[base + c * stride + p.head_dim], lc, M);
        }
    if (tid < MERGE_WINDOW) weight[tid] = f0;  // published by workgroup_sum's first barrier
    const float L = workgroup_sum(l);

    float acc = 0.0;
    [[unroll]] for (uint i = 0; i < MERGE_VALUES; ++i)
        if (part + i * parts < first_n) acc += v[i] * weight[part + i * parts];
    for (uint j = part + MERGE_VALUES * parts; j < first_n; j += parts) acc += partial[at + j * stride] * weight[j];
    for (uint c0 = c_begin + MERGE_WINDOW; c0 < c_end; c0 += MERGE_WINDOW) {
        const uint w = min(MERGE_WINDOW, c_end - c0);
        barrier();  // the previous window's factors have been read
        if (tid < w) weight[tid] = chunk_factor(partial[base + (c0 + tid) * stride + p.head_dim],
                                                partial[base + (c0 + tid) * stride + p.head_dim + 1], M);
        barrier();
        for (uint j = part; j < w; j += parts) acc += partial[at + (c0 - c_begin + j) * stride] * weight[j];
    }
    for (uint s = parts / 2; s > 0; s /= 2) acc += subgroupShuffleXor(acc, s);
    if (part == 0 && dim < p.head_dim) write_out(dim, acc / L);
}

#endif
