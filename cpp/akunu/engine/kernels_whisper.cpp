// Launchers of the encoder-decoder kernels (kernels.h, "Encoder-decoders"): the Conv1d columns,
// row copies through indices, and Whisper's attention (the encoder's windows in tiles of query
// rows, a decoder step's cross-attention split over keys).
#include <cstdio>

#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

namespace {
constexpr size_t kElementGroup = 256;  // local_size_x of conv_gather and copy_rows
}

void conv_gather(DispatchSink& s, const Binding& x, const Binding& out, const Binding& step,
                 const ConvGatherParams& p) {
    AKUNU_CHECK(p.rows > 0 && p.channels > 0 && p.kernel > 0 && p.stride > 0 && p.t_in > 0 && p.t_out > 0,
                "conv_gather: rows, channels, kernel, stride and both lengths must be positive");
    AKUNU_CHECK(p.rows % p.t_out == 0, "conv_gather: rows must be whole windows of t_out positions");
    const size_t windows = p.rows / p.t_out, width = size_t(p.channels) * p.kernel;
    AKUNU_CHECK(size_t(p.t_out - 1) * p.stride + p.kernel <= size_t(p.t_in) + 2 * p.pad,
                "conv_gather: t_out positions reach past the padded input");
    const size_t last =
        (windows - 1) * p.window_stride + size_t(p.channels - 1) * p.c_stride + size_t(p.t_in - 1) * p.t_stride + 1;
    check_fits(x, last, DType::kF32, "conv_gather", "x");
    check_fits(out, size_t(p.rows) * width, DType::kF32, "conv_gather", "out");
    check_bytes(step, sizeof(StepState), "conv_gather", "step");
    const size_t total = size_t(checked_u32(size_t(p.rows) * width, "conv_gather: elements"));
    emit(s, "conv_gather", {}, {x, out, step}, p, grid_for(s, (total + kElementGroup - 1) / kElementGroup));
}

void copy_rows(DispatchSink& s, const Binding& src, const Binding& src_rows, const Binding& dst,
               const Binding& dst_rows, const Binding& step, const CopyRowsParams& p, size_t src_extent,
               size_t dst_extent) {
    AKUNU_CHECK(p.rows > 0 && p.n > 0 && p.src_stride >= p.n && p.dst_stride >= p.n,
                "copy_rows: rows and n must be positive and each stride at least n");
    check_fits(src, (src_extent - 1) * p.src_stride + p.n, DType::kF32, "copy_rows", "src");
    check_fits(dst, (dst_extent - 1) * p.dst_stride + p.n, DType::kF32, "copy_rows", "dst");
    check_fits(src_rows, p.rows, DType::kU32, "copy_rows", "src_rows");
    check_fits(dst_rows, p.rows, DType::kU32, "copy_rows", "dst_rows");
    check_bytes(step, sizeof(StepState), "copy_rows", "step");
    const size_t total = size_t(checked_u32(size_t(p.rows) * p.n, "copy_rows: elements"));
    emit(s, "copy_rows", {}, {src, src_rows, dst, dst_rows, step}, p,
         grid_for(s, (total + kElementGroup - 1) / kElementGroup));
}

// ---- Whisper's attention ---------------------------------------------------------------------

namespace {

// Tuning whisper_attn "tile_rows:chunk_keys"; an absent part is -1 (the device's choice).
std::pair<int, int> whisper_attn_tuning(const DeviceProfile& d) {
    int rows = -1, keys = -1;
    const std::string& v = d.tuning.whisper_attn;
    if (v.empty()) return {rows, keys};
    char tail = 0;
    AKUNU_CHECK(
        std::sscanf(v.c_str(), "%d:%d%c", &rows, &keys, &tail) == 2 && rows >= 0 && keys >= 0,
        "tuning whisper_attn takes \"tile_rows:chunk_keys\" (whole numbers, 0: the per-row kernel), not '" + v + "'");
    return {rows, keys};
}

// Lanes per query row of window_attention.comp (its TEAM): the largest power of two up to 8
// that divides head_dim / 4, so that each lane owns whole vec4 slots; 0 where head_dim is not
// a multiple of 4 or exceeds AKUNU_WINDOW_MAX_HEAD_DIM.
uint32_t window_team(uint32_t head_dim) {
    if (head_dim % 4 != 0 || head_dim > AKUNU_WINDOW_MAX_HEAD_DIM) return 0;
    uint32_t team = 8;
    while ((head_dim / 4) % team != 0) team /= 2;
    return team;
}

// Keys per chunk of span_split: enough chunks that one row's heads give each compute unit
// about two workgroups (a greedy step has one row), in multiples of 8 keys, between 32 and
// AKUNU_SPAN_MAX_CHUNK_KEYS, and at most AKUNU_SPAN_MAX_CHUNKS chunks. Without a count of
// compute units (lavapipe) few long chunks: its cost is the work, not the latency.
uint32_t span_chunk_keys(const DeviceProfile& d, uint32_t span, uint32_t n_heads) {
    uint32_t keys = 256;
    if (d.compute_units > 0) {
        const uint32_t chunks = std::max(1u, (2 * d.compute_units + n_heads - 1) / n_heads);
        keys = ((span + chunks - 1) / chunks + 7) / 8 * 8;
    }
    keys = std::clamp<uint32_t>(keys, 32, AKUNU_SPAN_MAX_CHUNK_KEYS);
    return std::max(keys, (span + AKUNU_SPAN_MAX_CHUNKS - 1) / AKUNU_SPAN_MAX_CHUNKS);
}

// encoder_attention's parameters, after checking every operand against them as `kernel`.
EncoderAttentionParams span_params(const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                                   const Binding& out, const EncoderAttentionShape& sh, const Binding* weights,
                                   const char* kernel) {
    const std::string k = kernel;
    const size_t width = size_t(sh.n_heads) * sh.head_dim;
    const uint32_t kv_stride = sh.kv_stride ? sh.kv_stride : sh.q_stride;
    AKUNU_CHECK(sh.q_stride >= width && kv_stride >= sh.k_offset + width && kv_stride >= sh.v_offset + width,
                k + ": q, k and v must be column slices of their rows");
    check_fits(q, (size_t(sh.rows) - 1) * sh.q_stride + width, DType::kF32, kernel, "q");
    check_fits(kv, size_t(kv_stride), DType::kF32, kernel, "kv");
    if (seq.buffer) check_fits(seq, size_t(sh.rows) * 2, DType::kU32, kernel, "seq");
    check_bytes(step, sizeof(StepState), kernel, "step");
    AKUNU_CHECK(sh.out_stride >= width, k + ": out_stride is shorter than n_heads * head_dim");
    check_fits(out, (size_t(sh.rows) - 1) * sh.out_stride + width, DType::kF32, kernel, "out");
    if (weights) {
        AKUNU_CHECK(sh.weights_stride > 0, k + ": weights need a weights_stride (the longest span)");
        check_fits(*weights, size_t(sh.rows) * sh.n_heads * sh.weights_stride, DType::kF32, kernel, "weights");
    }
    return {checked_u32(sh.n_heads, (k + ": n_heads").c_str()),
            checked_u32(sh.head_dim, (k + ": head_dim").c_str()),
            checked_u32(sh.rows, (k + ": rows").c_str()),
            sh.q_stride,
            sh.k_offset,
            sh.v_offset,
            sh.out_stride,
            sh.scale,
            kv_stride,
            sh.weights_stride};
}

}  // namespace

void encoder_attention(DispatchSink& s, const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                       const Binding& out, const EncoderAttentionShape& sh, const Binding* weights) {
    AKUNU_CHECK(seq.buffer, "encoder_attention: seq is not a buffer");
    const EncoderAttentionParams p = span_params(q, kv, seq, step, out, sh, weights, "encoder_attention");
    std::vector<Binding> bindings{q, kv, seq, step, out};
    if (weights) bindings.push_back(*weights);
    emit(s, weights ? "encoder_attention_weights" : "encoder_attention", {}, std::move(bindings), p,
         grid_for(s, size_t(sh.rows) * sh.n_heads));
}

void window_attention(DispatchSink& s, const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                      const Binding& out, const EncoderAttentionShape& sh, uint32_t window, uint32_t tile_rows) {
    const DeviceProfile& d = s.device().profile();
    const uint32_t team = window_team(sh.head_dim);
    const int tuned = whisper_attn_tuning(d).first;
    if (tile_rows == 0) tile_rows = tuned >= 0 ? uint32_t(tuned) : 16;
    if (d.cpu_backend || team == 0 || tile_rows == 0 || !d.subgroup_shuffle || d.subgroup_size < 8) {
        encoder_attention(s, q, kv, seq, step, out, sh);  // the per-row kernel
        return;
    }
    AKUNU_CHECK(window > 0 && sh.rows % window == 0, "window_attention: rows (" + std::to_string(sh.rows) +
                                                         ") must be a whole number of windows of " +
                                                         std::to_string(window));
    // At least a subgroup per workgroup (a team, a power of two up to 8, never straddles two).
    tile_rows = std::max(tile_rows, (d.subgroup_size + team - 1) / team);
    AKUNU_CHECK(size_t(tile_rows) * team <= d.max_workgroup_invocations,
                "window_attention: tiles of " + std::to_string(tile_rows) + " rows need more invocations than the " +
                    std::to_string(d.max_workgroup_invocations) + " of a workgroup");
    const EncoderAttentionParams a = span_params(q, kv, Binding(), step, out, sh, nullptr, "window_attention");
    check_fits(kv, (size_t(sh.rows) - 1) * a.kv_stride + std::max(sh.k_offset, sh.v_offset) + sh.n_heads * sh.head_dim,
               DType::kF32, "window_attention", "kv");
    const WindowAttentionParams p{a, window, tile_rows};
    // Workgroups (window, tile, head), row-major over the windows: a call of fewer windows runs
    // the first ones' (the table's chunk rows count windows).
    const size_t groups = size_t(sh.rows / window) * ((window + tile_rows - 1) / tile_rows) * sh.n_heads;
    emit(s, "window_attention", {tile_rows * team, team, sh.head_dim / 4 / team}, {q, kv, step, out}, p,
         grid_for(s, groups));
}

size_t span_partial_floats(size_t rows, size_t n_heads, size_t head_dim) {
    return rows * n_heads * (1 + AKUNU_SPAN_MAX_CHUNKS * (head_dim + 2));
}

void span_attention_split(DispatchSink& s, const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                          const Binding& out, const EncoderAttentionShape& sh, const Binding& weights,
                          const Binding& partial, uint32_t chunk_keys) {
    const DeviceProfile& d = s.device().profile();
    const int tuned = whisper_attn_tuning(d).second;
    if (chunk_keys == 0 && tuned != 0 && sh.weights_stride > 0)
        chunk_keys = tuned > 0 ? uint32_t(tuned) : span_chunk_keys(d, sh.weights_stride, sh.n_heads);
    if (d.cpu_backend || chunk_keys == 0 || !d.subgroup_shuffle || d.subgroup_size < 8) {
        encoder_attention(s, q, kv, seq, step, out, sh, &weights);  // the per-row kernel
        return;
    }
    AKUNU_CHECK(seq.buffer, "span_attention_split: seq is not a buffer");
    const EncoderAttentionParams a = span_params(q, kv, seq, step, out, sh, &weights, "span_attention_split");
    const uint32_t n_chunks = (sh.weights_stride + chunk_keys - 1) / chunk_keys;
    AKUNU_CHECK(chunk_keys <= AKUNU_SPAN_MAX_CHUNK_KEYS && n_chunks <= AKUNU_SPAN_MAX_CHUNKS,
                "span_attention_split: chunks of " + std::to_string(chunk_keys) + " keys over spans of " +
                    std::to_string(sh.weights_stride) + " need at most " + std::to_string(AKUNU_SPAN_MAX_CHUNK_KEYS) +
                    " keys a chunk and " + std::to_string(AKUNU_SPAN_MAX_CHUNKS) + " chunks");
    check_fits(partial, span_partial_floats(sh.rows, sh.n_heads, sh.head_dim), DType::kF32, "span_attention_split",
               "partial");
    const SpanSplitParams p{a, chunk_keys, n_chunks};
    // Workgroups (row, head, chunk), row-major over the rows: a call of fewer rows runs theirs.
    const Grid grid = grid_for(s, size_t(sh.rows) * sh.n_heads * n_chunks);
    // The partial's counters must be zero before the first dispatch (its owner clears it).
    emit(s, "span_split", {}, {q, kv, seq, step, weights, partial, out}, p, grid);
}

}  // namespace akunu::kernels
