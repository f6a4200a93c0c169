// The attention of a batched step's rows (kernels::attention_rows): runs of one sequence's rows
// in query tiles (flash_cm, flash_attention), the other rows either in attention_split's layout
// (a workgroup per row, head and chunk of the row's own blocks, where batch_row_split takes
// them) or one workgroup per row and head (attention_rows.comp).
#include <string>

#include "akunu/core/error.h"
#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

namespace {

// The most bytes of partials a batch's scratch plans for the rows' split attention; a table of
// more rows x heads x chunks keeps attention_rows.
constexpr uint64_t kRowPartialBudget = 256ull << 20;

uint64_t chunks_of(uint32_t max_len) { return (uint64_t(max_len) + AKUNU_ATTENTION_CHUNK - 1) / AKUNU_ATTENTION_CHUNK; }

// The tiled rows' query tiles (batch_tile_rows of them per tile).
void attend_tiles(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out, const Binding& step,
                  const FlashShape& f, const FlashAttentionParams& p, const Binding& tiles, uint32_t tile_rows) {
    const DeviceProfile& d = s.device().profile();
    const AttentionShape& sh = f.heads;
    const uint64_t capacity = batch_tile_capacity(f.rows);
    check_bytes(tiles, capacity * sizeof(BatchTile), "attention_rows", "tiles");
    AKUNU_CHECK(capacity <= d.max_workgroup_count_x && sh.n_heads <= 65535,
                "attention_rows: too many rows or heads for one dispatch");
    // Tile i in workgroup column i; the columns follow the step's rows (at most n / 2 + 1 tiles).
    const Grid grid{uint32_t(capacity), sh.n_heads, ChunkRows::Axis::kX};
    const std::vector<Binding> bindings = {q, cache.k, cache.v, out, step, tiles};
    if (tile_rows == AKUNU_FLASH_CM_ROWS)
        emit(s, "flash_cm_d" + std::to_string(sh.head_dim) + "_batch", {}, bindings, p, grid);
    else
        emit(s, cache_variant("flash_attention", cache), {sh.head_dim / 8}, bindings, p, grid);
}

// The untiled rows in attention_split's layout: workgroups (k, head) along x, row-major, for
// the step's k-th untiled row (BatchRow::untiled_row), so that their count follows the untiled
// rows (DispatchTable::set_step: a scoring step's rows, all in query tiles, launch none),
// and the chunks of a row's cache along y, whose count follows the step's latest position
// (DispatchTable::set_position). A row's chunks past its own position return at once, and its
// last chunk to finish merges the others' partials.
void attend_rows_split(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out,
                       const Binding& step, const FlashShape& f, FlashAttentionParams p, const RowPartials& parts) {
    const AttentionShape& sh = f.heads;
    AKUNU_CHECK(f.q_stride % 4 == 0, "attention_rows: the split kernel reads Q rows as vec4s (q_stride " +
                                         std::to_string(f.q_stride) + " is not a multiple of 4)");
    check_fits(parts.partial, batch_row_partial_floats(f.rows, sh.n_heads, sh.head_dim, sh.max_len), DType::kF32,
               "attention_rows", "partial");
    check_fits(parts.counters, size_t(f.rows) * sh.n_heads, DType::kU32, "attention_rows", "counters");
    p.a.n_chunks = uint32_t(chunks_of(sh.max_len));
    const AttentionSplitShape a = attention_split_shape(s.device().profile(), sh.head_dim, cache.dtype);
    std::vector<Binding> bindings = {q, cache.k, cache.v, parts.partial, step, out, parts.counters};
    emit(s, attention_variant("attention_split", cache), {a.team, a.lane_vecs},
         with_recent(std::move(bindings), cache, "attention_rows"), p,
         {f.rows * sh.n_heads, p.a.n_chunks, ChunkRows::Axis::kX, 0, 0, AKUNU_ATTENTION_CHUNK, true});
}

}  // namespace

size_t batch_row_partial_floats(uint32_t rows, uint32_t n_heads, uint32_t head_dim, uint32_t max_len) {
    return size_t(rows) * n_heads * chunks_of(max_len) * (size_t(head_dim) + 2);
}

bool batch_row_split(const DeviceProfile& d, uint32_t rows, uint32_t n_heads, uint32_t head_dim, uint32_t max_len) {
    if (!d.tuning.batch_row_attention || d.cpu_backend || !d.subgroup_shuffle || d.subgroup_size < 8) return false;
    if (d.max_workgroup_invocations < AKUNU_ATTENTION_CHUNK) return false;
    if (head_dim % 8 != 0 || head_dim > AKUNU_ATTENTION_CHUNK) return false;
    if (uint64_t(rows) * n_heads > d.max_workgroup_count_x || chunks_of(max_len) > 65535) return false;
    return uint64_t(batch_row_partial_floats(rows, n_heads, head_dim, max_len)) * 4 <= kRowPartialBudget;
}

uint32_t batch_tile_rows(const DeviceProfile& d, const KvBindings& cache, uint32_t head_dim) {
    if (!d.tuning.batch_flash || !d.subgroup_shuffle || d.subgroup_size < 8) return 0;
    if (head_dim % 8 != 0 || head_dim > AKUNU_FLASH_MAX_HEAD_DIM) return 0;
    if (cache.recent > 0) return 0;  // the tiled kernels read no recent window's rings
    const bool coopmat =
        d.tuning.flash_coopmat && d.gemm_coopmat && cache.dtype == KvDType::kF16 && (head_dim == 64 || head_dim == 128);
    return coopmat ? AKUNU_FLASH_CM_ROWS : AKUNU_FLASH_ROWS;
}

void attention_rows(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out, const Binding& step,
                    const FlashShape& f, const Binding* tiles, const RowPartials* partials) {
    const AttentionShape& sh = f.heads;
    AKUNU_CHECK(cache.rows == KvRows::kBatch, "attention_rows reads the cache of a batch (a KvPool)");
    AKUNU_CHECK(f.out_dtype == DType::kF32, "attention_rows writes f32");
    // The kernels index each sequence's blocks by the context (KV_SEQ_BLOCKS, kv_rows.glsl).
    const FlashAttentionParams p = flash_params(q, cache, out, f, sh.max_len, "attention_rows");
    check_bytes(step, sizeof(StepState) + size_t(f.rows) * sizeof(BatchRow), "attention_rows", "step and rows");
    const DeviceProfile& d = s.device().profile();
    const uint32_t tile_rows = tiles ? batch_tile_rows(d, cache, sh.head_dim) : 0;
    if (tile_rows > 0) attend_tiles(s, q, cache, out, step, f, p, *tiles, tile_rows);
    if (partials && batch_row_split(d, f.rows, sh.n_heads, sh.head_dim, sh.max_len)) {
        attend_rows_split(s, q, cache, out, step, f, p, *partials);
        return;
    }
    emit(s, attention_variant("attention_rows", cache), {},
         with_recent({q, cache.k, cache.v, out, step}, cache, "attention_rows"), p,
         grid_for(s, size_t(f.rows) * sh.n_heads));
}

}  // namespace akunu::kernels
