// The KV-cache writers of kernels.h: RoPE with the f16 cache write (rope_kv), a quantized
// cache's packing after RoPE (kv_write: kv_store, after hadamard_rows for the rotated formats),
// the rotation itself, and a recent window's ring write (kv_recent_store).
#include <string>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

void hadamard_rows(DispatchSink& s, const Binding& x, const Binding& step, size_t rows, size_t heads, size_t head_dim,
                   size_t row_stride) {
    const int block = kv_rotation_block(int(head_dim));
    AKUNU_CHECK(head_dim > 0 && head_dim <= 256 && block >= 2,
                "hadamard_rows: head_dim " + std::to_string(head_dim) + " must be even and at most 256");
    AKUNU_CHECK(row_stride >= heads * head_dim, "hadamard_rows: row_stride is shorter than the heads of a row");
    check_fits(x, (rows - 1) * row_stride + heads * head_dim, DType::kF32, "hadamard_rows", "x");
    check_bytes(step, sizeof(StepState), "hadamard_rows", "step");
    HadamardRowsParams p{checked_u32(heads, "hadamard_rows: heads"), checked_u32(head_dim, "hadamard_rows: head_dim"),
                         uint32_t(block), checked_u32(rows, "hadamard_rows: rows"),
                         checked_u32(row_stride, "hadamard_rows: row_stride")};
    emit(s, "hadamard_rows", {}, {x, step}, p, grid_for(s, rows * heads));
}

namespace {

// rope_kv's and kv_write's parameters, after the checks they share.
RopeKvParams rope_kv_params(const Binding& qkv, const KvBindings& cache, const Binding& step, const RopeKvShape& sh,
                            const char* kernel) {
    const size_t q_dim = size_t(sh.n_heads) * sh.head_dim, kv_dim = size_t(sh.n_kv_heads) * sh.head_dim;
    const size_t stride = sh.row_stride ? sh.row_stride : q_dim + 2 * kv_dim;
    AKUNU_CHECK(stride >= q_dim + 2 * kv_dim, std::string(kernel) + ": row_stride is shorter than a [q | k | v] row");
    check_fits(qkv, (sh.rows - 1) * stride + q_dim + 2 * kv_dim, DType::kF32, kernel, "qkv");
    check_cache(cache, sh.n_kv_heads, sh.max_len, sh.head_dim, kernel);
    check_bytes(step, sizeof(StepState), kernel, "step");
    // The kernels' max_len is the cache's rows per head (a ring's length); blocks ignore it.
    return {sh.n_heads,
            sh.n_kv_heads,
            sh.head_dim,
            cache.in_blocks() ? sh.max_len : cache.cache_rows,
            sh.interleaved ? 1u : 0u,
            sh.rotate ? 1u : 0u,
            checked_u32(sh.rows, (std::string(kernel) + ": rows").c_str()),
            uint32_t(stride)};
}

// A quantized cache's write: hadamard_rows on Q, K and V for a rotated one, then kv_store, one
// invocation per packed word of each token's K and V rows.
void quantized_write(DispatchSink& s, const Binding& qkv, const KvBindings& cache, const Binding& step,
                     const RopeKvParams& p, AttentionNewest newest = AttentionNewest::kInCache) {
    if (kv_rotated(cache.dtype))  // Q, K and V heads, side by side in each row
        hadamard_rows(s, qkv, step, p.rows, size_t(p.n_heads) + 2 * size_t(p.n_kv_heads), p.head_dim, p.row_stride);
    if (newest == AttentionNewest::kPacked) return;  // the attention after packs them
    const size_t words =
        size_t(p.rows) * p.n_kv_heads * p.head_dim *
        size_t(kv_value_bits(kv_side(cache.dtype, false)) + kv_value_bits(kv_side(cache.dtype, true))) / 32;
    std::vector<Binding> bindings = {qkv, cache.k, cache.v, cache.k_scales, cache.v_scales, step};
    if (cache.in_blocks()) bindings = {qkv, cache.k, cache.v, step};  // the scales sit in the blocks
    emit(s, cache_variant("kv_store", cache), {}, bindings, p, grid_for(s, (words + 63) / 64));
}

}  // namespace

void rope_kv(DispatchSink& s, const Binding& qkv, const Binding& cos, const Binding& sin, const KvBindings& cache,
             const Binding& step, const RopeKvShape& sh) {
    const RopeKvParams p = rope_kv_params(qkv, cache, step, sh, "rope_kv");
    const size_t half = sh.head_dim / 2, kv_dim = size_t(sh.n_kv_heads) * sh.head_dim;
    check_fits(cos, size_t(sh.max_len) * half, DType::kF32, "rope_kv", "cos");
    check_fits(sin, size_t(sh.max_len) * half, DType::kF32, "rope_kv", "sin");
    // Four pairs (and V elements) an invocation where every vec4 it reads or writes is whole:
    // head_dim a multiple of 8, rows and tables starting on 16 bytes.
    const bool vec4 = sh.head_dim % 8 == 0 && p.row_stride % 4 == 0 && qkv.offset % 16 == 0 && cos.offset % 16 == 0 &&
                      sin.offset % 16 == 0;
    const uint32_t per = vec4 ? 4 : 1;
    const size_t items = size_t(sh.rows) * ((size_t(sh.n_heads) + sh.n_kv_heads) * half + kv_dim) / per;
    const bool f16 = cache.dtype == KvDType::kF16;
    const char* rope_only = cache.rows == KvRows::kBatch ? "rope_only_batch" : "rope_only";
    emit(s, f16 ? cache_variant("rope_kv", cache) : rope_only, {per}, {qkv, cos, sin, cache.k, cache.v, step}, p,
         grid_for(s, (items + 63) / 64));
    if (!f16) quantized_write(s, qkv, cache, step, p);
}

void kv_write(DispatchSink& s, const Binding& qkv, const KvBindings& cache, const Binding& step, const RopeKvShape& sh,
              AttentionNewest newest) {
    AKUNU_CHECK(cache.dtype != KvDType::kF16,
                "kv_write: an f16 cache is written with RoPE (rope_kv or the Q/K/V GEMV)");
    AKUNU_CHECK(newest == AttentionNewest::kInCache || sh.rows == 1,
                "kv_write: attention packs the step's row only for a step of one row");
    quantized_write(s, qkv, cache, step, rope_kv_params(qkv, cache, step, sh, "kv_write"), newest);
}

void kv_recent_store(DispatchSink& s, const Binding& qkv, const KvBindings& cache, const Binding& step,
                     const RopeKvShape& sh) {
    const size_t q_dim = size_t(sh.n_heads) * sh.head_dim, kv_dim = size_t(sh.n_kv_heads) * sh.head_dim;
    AKUNU_CHECK(cache.recent > 0 && cache.recent_rows >= cache.recent,
                "kv_recent_store: the cache has no recent window");
    AKUNU_CHECK(sh.row_stride >= q_dim + 2 * kv_dim, "kv_recent_store: row_stride is shorter than a [q | k | v] row");
    check_fits(qkv, (sh.rows - 1) * size_t(sh.row_stride) + q_dim + 2 * kv_dim, DType::kF32, "kv_recent_store", "qkv");
    // A batch's rings: one per sequence, each row in its own sequence's (BatchRow).
    const bool batch = cache.rows == KvRows::kBatch;
    const size_t ring = size_t(batch ? cache.sequences : 1) * sh.n_kv_heads * cache.recent_rows * sh.head_dim;
    check_fits(cache.k_recent, ring, DType::kF16, "kv_recent_store", "k_recent");
    check_fits(cache.v_recent, ring, DType::kF16, "kv_recent_store", "v_recent");
    check_bytes(step, sizeof(StepState) + (batch ? size_t(sh.rows) * sizeof(BatchRow) : 0), "kv_recent_store", "step");
    const RopeKvParams p{sh.n_heads,
                         sh.n_kv_heads,
                         sh.head_dim,
                         cache.recent_rows,
                         0,
                         0,
                         checked_u32(sh.rows, "kv_recent_store: rows"),
                         sh.row_stride};
    emit(s, batch ? "kv_recent_store_batch" : "kv_recent_store", {}, {qkv, cache.k_recent, cache.v_recent, step}, p,
         grid_for(s, (size_t(sh.rows) * 2 * kv_dim + 63) / 64));
}

}  // namespace akunu::kernels
