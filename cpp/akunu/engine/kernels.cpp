// Argument checks, variant choice and workgroup geometry for the kernels in kernels.h (the GEMVs:
// kernels_gemv.cpp; the prefill GEMMs: kernels_gemm.cpp; a batched step's attention:
// kernels_batch_attention.cpp; the KV-cache writers: kernels_kv_write.cpp; what the launcher
// files share: kernel_launch.h).
#include "akunu/engine/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "akunu/formats/tiles.h"
#include "akunu/core/error.h"
#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kv_format.h"
#include "gemm_tiles.h"
#include "params.h"

namespace akunu::kernels {

namespace launch {

// The cache bindings a kernel reads or writes, checked against the cache layout: K and V (and
// for a quantized cache their row scales) for n_kv * cache_rows rows of head_dim, or for a
// cache in blocks the two block tables, one address per block of the context.
void check_cache(const KvBindings& c, size_t n_kv, size_t max_len, size_t head_dim, const char* kernel) {
    AKUNU_CHECK(c.dtype == KvDType::kF16 || head_dim % 8 == 0,
                std::string(kernel) + ": a quantized cache needs head_dim to be a multiple of 8");
    if (c.in_blocks()) {
        const size_t blocks = (max_len + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK * c.sequences;
        check_bytes(c.k, blocks * 8, kernel, "k_block_table");
        check_bytes(c.v, blocks * 8, kernel, "v_block_table");
        return;
    }
    AKUNU_CHECK(c.cache_rows > 0 && (c.rows == KvRows::kRing || c.cache_rows == max_len),
                std::string(kernel) + ": the cache holds " + std::to_string(c.cache_rows) + " rows per head; a " +
                    kv_rows_name(c.rows) + " cache of a context of " + std::to_string(max_len) + " needs " +
                    (c.rows == KvRows::kRing ? "at least one" : std::to_string(max_len)));
    const size_t rows = n_kv * c.cache_rows;
    check_bytes(c.k, rows * head_dim * size_t(kv_value_bits(kv_side(c.dtype, false))) / 8, kernel, "k_cache");
    check_bytes(c.v, rows * head_dim * size_t(kv_value_bits(kv_side(c.dtype, true))) / 8, kernel, "v_cache");
    if (c.dtype == KvDType::kF16) return;
    check_bytes(c.k_scales, rows * 2, kernel, "k_scales");
    check_bytes(c.v_scales, rows * 2, kernel, "v_scales");
}

}  // namespace launch

using namespace launch;

namespace {

// Elementwise kernels use 256 invocations per workgroup (their local_size_x).
constexpr uint32_t kElementwiseGroup = 256;

std::string variant(const char* kernel, DType dtype) { return std::string(kernel) + "_" + dtype_traits(dtype).name; }

// Weight types with GEMV/GEMM/embedding variants (their kernel names: formats/tiles.h
// variant_name).
const TensorType kWeightVariants[] = {
    TensorType::F32,      TensorType::F16,       TensorType::BF16,     TensorType::Q8_0,      TensorType::Q4_0,
    TensorType::Q4_1,     TensorType::Q5_0,      TensorType::Q5_1,     TensorType::Q4_K,      TensorType::Q5_K,
    TensorType::Q6_K,     TensorType::MLX4_G32,  TensorType::MLX4_G64, TensorType::MLX4_G128, TensorType::MLX8_G32,
    TensorType::MLX8_G64, TensorType::MLX8_G128,
};

}  // namespace

namespace launch {

std::string cache_variant(const char* kernel, const KvBindings& c) {
    std::string name = kernel;
    if (c.dtype != KvDType::kF16) name.append("_").append(kv_variant_suffix(c.dtype));
    if (c.rows != KvRows::kFull) name.append("_").append(kv_rows_name(c.rows));
    return name;
}
std::vector<Binding> cache_bindings(std::vector<Binding> first, const KvBindings& c) {
    if (c.dtype != KvDType::kF16 && !c.in_blocks()) {
        first.push_back(c.k_scales);
        first.push_back(c.v_scales);
    }
    return first;
}

std::string attention_variant(const char* kernel, const KvBindings& c) {
    return cache_variant(kernel, c) + (c.recent > 0 ? "_recent" : "");
}
std::vector<Binding> with_recent(std::vector<Binding> b, const KvBindings& c, const char* kernel) {
    if (c.recent == 0) return b;
    AKUNU_CHECK(c.dtype != KvDType::kF16 && c.recent_rows >= c.recent && c.step_kv.buffer && c.k_recent.buffer &&
                    c.v_recent.buffer && c.step_kv_stride > 0,
                std::string(kernel) + ": a recent window needs a quantized cache, its rings (at least " +
                    std::to_string(c.recent) + " rows) and the step's Q/K/V rows");
    b.push_back(c.step_kv);
    b.push_back(c.k_recent);
    b.push_back(c.v_recent);
    return b;
}

}  // namespace launch

namespace {

// The recent window's fields of an attention's parameters (kv_recent.glsl).
void set_recent(AttentionParams& p, const KvBindings& c) {
    p.recent = c.recent;
    p.recent_rows = c.recent_rows;
    p.kv_stride = c.step_kv_stride;
}

uint32_t reduce_group(const DispatchSink& s) {
    return std::min<uint32_t>(256, s.device().profile().max_workgroup_invocations);
}

}  // namespace

namespace launch {

AttentionSplitShape attention_split_shape(const DeviceProfile& d, uint32_t head_dim, KvDType cache) {
    AttentionSplitShape a;
    const uint32_t most = std::min(d.subgroup_size, 32u);
    if (cache != KvDType::kF16) {
        // Codes per 8-byte vector of each side: 64 / bits.
        const uint32_t k_codes = 64 / uint32_t(kv_value_bits(kv_side(cache, false)));
        const uint32_t v_codes = 64 / uint32_t(kv_value_bits(kv_side(cache, true)));
        const uint32_t vecs = head_dim / std::min(k_codes, v_codes);
        while (a.team < vecs) a.team *= 2;
        a.lane_vecs = head_dim % k_codes == 0 && head_dim % v_codes == 0 && a.team <= most ? 1 : 0;
        return a;
    }
    const uint32_t vecs = head_dim / 8;
    while (a.team * 2 <= std::min(vecs, most)) a.team *= 2;
    a.lane_vecs = (vecs + a.team - 1) / a.team;
    return a;
}

}  // namespace launch

std::string weight_variant(const char* kernel, TensorType t) {
    // Tile-major forms (formats/tiles.h): the base type's kernel name plus "_t32" (the CPU backend's
    // layout) or "_t32v" (Vulkan devices').
    const cpu::TileLayout* l = cpu::tile_layout(t);
    for (const auto& v : kWeightVariants)
        if (v == (l ? l->base : t)) return cpu::variant_name(kernel, t);
    throw Error(std::string(kernel) + ": weight type " + type_traits(t).name +
                " is not supported yet (supported: " + supported_weight_types() + ")");
}

void fill(DispatchSink& s, const Binding& out, DType dtype, size_t n, float value, uint32_t bits) {
    check_dtype(dtype, {DType::kF32, DType::kF16, DType::kU32}, "fill");
    check_fits(out, n, dtype, "fill", "out");
    FillParams p{checked_u32(n, "fill: n"), value, bits};
    emit(s, variant("fill", dtype), {}, {out}, p, grid_for(s, (n + kElementwiseGroup - 1) / kElementwiseGroup));
}

void copy(DispatchSink& s, const Binding& src, const Binding& dst, size_t bytes) {
    AKUNU_CHECK(bytes % 4 == 0, "copy: " + std::to_string(bytes) + " bytes is not a whole number of 32-bit words");
    check_fits(src, bytes / 4, DType::kU32, "copy", "src");
    check_fits(dst, bytes / 4, DType::kU32, "copy", "dst");
    const size_t words = bytes / 4;
    CopyParams p{checked_u32(words, "copy: words")};
    const size_t per_group = (words % 4 == 0 ? 4 : 1) * kElementwiseGroup;
    emit(s, "copy_u32", {}, {src, dst}, p, grid_for(s, (words + per_group - 1) / per_group));
}

void read(DispatchSink& s, const Binding& src, const Binding& flag, size_t bytes) {
    AKUNU_CHECK(bytes % 16 == 0, "read: " + std::to_string(bytes) + " bytes is not a whole number of 16-byte vectors");
    check_fits(src, bytes / 4, DType::kU32, "read", "src");
    check_fits(flag, 1, DType::kU32, "read", "flag");
    CopyParams p{checked_u32(bytes / 4, "read: words")};
    const size_t groups = std::max<size_t>(1, (bytes / 16 + kElementwiseGroup - 1) / kElementwiseGroup);
    emit(s, "read_u32", {}, {src, flag}, p, grid_for(s, groups));
}

void add(DispatchSink& s, const Binding& a, const Binding& b, const Binding& c, DType dtype, size_t n) {
    add_rows(s, a, b, c, dtype, {n, 1, n, n, n});
}

void add_rows(DispatchSink& s, const Binding& a, const Binding& b, const Binding& c, DType dtype, const RowsShape& r) {
    check_dtype(dtype, {DType::kF32, DType::kF16}, "add");
    AKUNU_CHECK(r.rows > 0, "add: rows must be positive");
    check_fits(a, (r.rows - 1) * r.a_stride + r.n, dtype, "add", "a");
    check_fits(b, (r.rows - 1) * r.b_stride + r.n, dtype, "add", "b");
    check_fits(c, (r.rows - 1) * r.c_stride + r.n, dtype, "add", "c");
    AddParams p{checked_u32(r.n, "add: n"), checked_u32(r.rows, "add: rows"), uint32_t(r.a_stride),
                uint32_t(r.b_stride), uint32_t(r.c_stride)};
    const size_t total = r.n * r.rows;
    checked_u32(total, "add: elements");
    emit(s, variant("add", dtype), {}, {a, b, c}, p, grid_for(s, (total + kElementwiseGroup - 1) / kElementwiseGroup));
}

// rmsnorm with y in y_dtype: dtype's own kernel, or f32 rows normed into halves.
static void emit_rmsnorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, DType dtype,
                         DType y_dtype, size_t rows, size_t dim, float eps, float weight_offset, size_t group,
                         size_t group_stride) {
    check_dtype(dtype, {DType::kF32, DType::kF16}, "rmsnorm");
    AKUNU_CHECK(y_dtype == dtype || (dtype == DType::kF32 && y_dtype == DType::kF16),
                "rmsnorm: y is x's dtype, or f16 for f32 x");
    AKUNU_CHECK(group > 0 && rows % group == 0, "rmsnorm: rows must be a whole number of groups");
    if (group_stride == 0) group_stride = group * dim;
    AKUNU_CHECK(group_stride >= group * dim, "rmsnorm: group_stride is shorter than a group of rows");
    const size_t extent = (rows / group - 1) * group_stride + group * dim;
    check_fits(x, extent, dtype, "rmsnorm", "x");
    check_fits(w, dim, dtype, "rmsnorm", "w");
    check_fits(y, extent, y_dtype, "rmsnorm", "y");
    AKUNU_CHECK(eps >= 0.0f, "rmsnorm: eps must be >= 0");
    RmsNormParams p{checked_u32(rows, "rmsnorm: rows"),
                    checked_u32(dim, "rmsnorm: dim"),
                    eps,
                    weight_offset,
                    checked_u32(group, "rmsnorm: group"),
                    checked_u32(group_stride, "rmsnorm: group_stride")};
    const std::string kernel = variant("rmsnorm", dtype) + (y_dtype != dtype ? "_f16" : "");
    // 4-vectors where every row and binding starts on 16 bytes (rmsnorm.comp VEC).
    const bool vec4 =
        dim % 4 == 0 && group_stride % 4 == 0 && x.offset % 16 == 0 && w.offset % 16 == 0 && y.offset % 16 == 0;
    emit(s, kernel, {reduce_group(s), vec4 ? 4u : 1u}, {x, w, y}, p, grid_for(s, rows));
}

void rmsnorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, DType dtype, size_t rows,
             size_t dim, float eps, float weight_offset, size_t group, size_t group_stride) {
    emit_rmsnorm(s, x, w, y, dtype, dtype, rows, dim, eps, weight_offset, group, group_stride);
}

void rmsnorm_to_f16(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, size_t rows, size_t dim,
                    float eps, float weight_offset) {
    emit_rmsnorm(s, x, w, y, DType::kF32, DType::kF16, rows, dim, eps, weight_offset, 1, 0);
}

bool weight_type_supported(TensorType type) {
    if (const cpu::TileLayout* l = cpu::tile_layout(type)) type = l->base;
    for (const auto& v : kWeightVariants)
        if (v == type) return true;
    return false;
}

std::string supported_weight_types() {
    std::string out;
    for (const auto& v : kWeightVariants) out += (out.empty() ? "" : ", ") + std::string(type_traits(v).name);
    return out;
}

bool dequantizes_to_f16(TensorType wtype) {
    if (tiles32(wtype)) return true;
    switch (wtype) {
        case TensorType::Q8_0:
        case TensorType::Q4_0:
        case TensorType::Q4_1:
        case TensorType::Q5_0:
        case TensorType::Q5_1:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K: return true;
        default: return false;
    }
}

void dequant_f16(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& out, size_t n, size_t k,
                 const Binding& step, uint32_t min_rows) {
    AKUNU_CHECK(dequantizes_to_f16(wtype),
                std::string("dequant_f16: ") + type_traits(wtype).name + " is not a block format");
    check_row_blocks(type_traits(wtype), k, "dequant_f16", "k");
    check_bytes(w, tensor_bytes(type_traits(wtype), uint64_t(n) * k, "dequant_f16 W"), "dequant_f16", "W");
    check_bytes(out, n * k * 2, "dequant_f16", "out");
    check_bytes(step, sizeof(StepState), "dequant_f16", "step");
    DequantParams p{checked_u32(n, "dequant_f16: n"), checked_u32(k, "dequant_f16: k"), min_rows};
    // The whole matrix whatever the chunk's length, for chunks of at least min_rows tokens.
    Grid grid = grid_for(s, (n * k / 8 + 255) / 256);
    grid.axis = ChunkRows::Axis::kNone;
    grid.min_rows = min_rows;
    emit(s, weight_variant("dequant_f16", wtype), {}, {w, out, step}, p, grid);
}

void embed(DispatchSink& s, const Binding& w, TensorType wtype, size_t vocab, const Binding& token_ids,
           const Binding& step, const Binding& out, size_t dim, float scale, size_t rows, size_t first_row) {
    const TensorTypeTraits& t = type_traits(wtype);
    check_row_blocks(t, dim, "embed", "dim");
    check_bytes(w, tensor_bytes(t, uint64_t(vocab) * dim, "embedding"), "embed", "W");
    check_fits(token_ids, rows, DType::kU32, "embed", "token_ids");
    check_fits(out, rows * dim, DType::kF32, "embed", "out");
    check_bytes(step, sizeof(StepState), "embed", "step");
    checked_u32(first_row + vocab, "embed: first_row + vocab");  // token ids are 32-bit
    EmbedParams p{checked_u32(dim, "embed: dim"), scale, checked_u32(rows, "embed: rows"),
                  checked_u32(vocab, "embed: vocab"), uint32_t(first_row)};
    const size_t items = rows * (t.block_size == 1 ? dim : dim / AKUNU_EMBED_BLOCK_ITEM);  // embed.comp ITEM
    emit(s, weight_variant("embed", wtype), {}, {w, token_ids, step, out}, p, grid_for(s, (items + 63) / 64));
}

void last_row(DispatchSink& s, const Binding& src, const Binding& dst, const Binding& step, size_t rows, size_t dim) {
    check_fits(src, rows * dim, DType::kF32, "last_row", "src");
    check_fits(dst, dim, DType::kF32, "last_row", "dst");
    check_bytes(step, sizeof(StepState), "last_row", "step");
    LastRowParams p{checked_u32(dim, "last_row: dim")};
    emit(s, "last_row", {}, {src, dst, step}, p, grid_for(s, (dim + kElementwiseGroup - 1) / kElementwiseGroup));
}

void softcap(DispatchSink& s, const Binding& x, const Binding& step, size_t rows, size_t n, float cap) {
    AKUNU_CHECK(cap > 0 && std::isfinite(cap),
                "softcap: the cap must be a positive number, found " + std::to_string(cap));
    check_fits(x, rows * n, DType::kF32, "softcap", "x");
    check_bytes(step, sizeof(StepState), "softcap", "step");
    const size_t total = rows * n;
    SoftcapParams p{checked_u32(n, "softcap: n"), checked_u32(rows, "softcap: rows"), cap};
    checked_u32(total, "softcap: elements");
    emit(s, "softcap", {}, {x, step}, p, grid_for(s, (total + kElementwiseGroup - 1) / kElementwiseGroup));
}

size_t attention_partial_floats(uint32_t n_heads, uint32_t head_dim, uint32_t max_len) {
    const size_t chunks = (size_t(max_len) + AKUNU_ATTENTION_CHUNK - 1) / AKUNU_ATTENTION_CHUNK;
    return size_t(n_heads) * chunks * (size_t(head_dim) + 2) + n_heads;  // then a counter per head
}

size_t attention_counters_offset(uint32_t n_heads, uint32_t head_dim, uint32_t max_len) {
    return (attention_partial_floats(n_heads, head_dim, max_len) - n_heads) * 4;
}

bool attention_packs_newest(const DeviceProfile& d, const KvBindings& cache, uint32_t head_dim) {
    return !d.cpu_backend && cache.dtype != KvDType::kF16 &&
           (cache.rows == KvRows::kFull || cache.rows == KvRows::kBlocks) &&
           launch::attention_split_shape(d, head_dim, cache.dtype).lane_vecs == 1;
}

bool attention_unrotates(const DeviceProfile& d, const KvBindings& cache) {
    return !d.cpu_backend && kv_rotated(cache.dtype);
}

void attention(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& partial, const Binding& out,
               const Binding& step, const AttentionShape& sh, const GemvHandoff* handoff, AttentionNewest newest) {
    AKUNU_CHECK(sh.n_kv_heads > 0 && sh.n_heads % sh.n_kv_heads == 0,
                "attention: n_heads must be a multiple of n_kv_heads");
    AKUNU_CHECK(s.device().profile().max_workgroup_invocations >= AKUNU_ATTENTION_CHUNK,
                "attention: the device runs fewer than " + std::to_string(AKUNU_ATTENTION_CHUNK) +
                    " invocations per workgroup");
    AKUNU_CHECK(sh.head_dim % 8 == 0 && sh.head_dim <= AKUNU_ATTENTION_CHUNK,
                "attention: head_dim " + std::to_string(sh.head_dim) + " must be a multiple of 8 up to " +
                    std::to_string(AKUNU_ATTENTION_CHUNK));
    AKUNU_CHECK(s.device().profile().subgroup_shuffle && s.device().profile().subgroup_size >= 8,
                "attention needs subgroup shuffles over at least 8 lanes");
    const size_t q_dim = size_t(sh.n_heads) * sh.head_dim;
    const uint32_t chunks = uint32_t((size_t(sh.max_len) + AKUNU_ATTENTION_CHUNK - 1) / AKUNU_ATTENTION_CHUNK);
    const bool packs = newest == AttentionNewest::kPacked;
    AKUNU_CHECK(!packs || attention_packs_newest(s.device().profile(), cache, sh.head_dim),
                "attention: this device and cache take the step's row from the cache, not packed by attention");
    // With packs, q is the step's [q | k | v] row.
    check_fits(q, q_dim + (packs ? 2 * size_t(sh.n_kv_heads) * sh.head_dim : 0), DType::kF32, "attention", "q");
    check_cache(cache, sh.n_kv_heads, sh.max_len, sh.head_dim, "attention");
    check_fits(partial, attention_partial_floats(sh.n_heads, sh.head_dim, sh.max_len), DType::kF32, "attention",
               "partial");
    check_fits(out, q_dim, DType::kF32, "attention", "out");
    AKUNU_CHECK(chunks <= 65535 && sh.n_heads <= s.device().profile().max_workgroup_count_x,
                "attention: too many heads or cache rows for one dispatch");
    AttentionParams p{sh.n_heads, sh.n_kv_heads, sh.head_dim, sh.max_len,       sh.window,
                      sh.scale,   sh.softcap,    chunks,      cache.cache_rows, handoff ? handoff->signal : 0};
    AKUNU_CHECK(!handoff || (!handoff->wait && !handoff->clear_count && handoff->signal),
                "attention: a hand-off only signals (the O GEMV waits for it)");
    check_handoff(handoff, attention_hands_off(s.device().profile(), 0), "attention");
    set_recent(p, cache);
    std::vector<Binding> bindings = cache_bindings({q, cache.k, cache.v, partial, step}, cache);
    bindings.push_back(out);  // binding 7
    bindings.push_back(handoff ? handoff->counters : out);  // binding 8 (out stands in: written anyway)
    bindings = with_recent(std::move(bindings), cache, "attention");
    const AttentionSplitShape a = attention_split_shape(s.device().profile(), sh.head_dim, cache.dtype);
    // Chunks along y: a step at position pos needs pos / CHUNK + 1 of them (attention_split.comp
    // counts its arrivals from pos, not from the grid), where the table follows the position.
    // A rotated cache's output leaves rotated back (kernel_policy.h attention_unrotates).
    const uint32_t unrotate =
        attention_unrotates(s.device().profile(), cache) ? uint32_t(kv_rotation_block(int(sh.head_dim))) : 0;
    emit(s, attention_variant("attention_split", cache) + (packs ? "_pack" : ""), {a.team, a.lane_vecs, unrotate},
         bindings, p, {sh.n_heads, chunks, ChunkRows::Axis::kNone, 0, 0, AKUNU_ATTENTION_CHUNK});
}

namespace launch {

FlashAttentionParams flash_params(const Binding& q, const KvBindings& cache, const Binding& out, const FlashShape& f,
                                  uint32_t cache_rows, const char* kernel) {
    const AttentionShape& sh = f.heads;
    const std::string k = kernel;
    AKUNU_CHECK(sh.n_kv_heads > 0 && sh.n_heads % sh.n_kv_heads == 0, k + ": n_heads must be a multiple of n_kv_heads");
    AKUNU_CHECK(sh.head_dim <= AKUNU_FLASH_MAX_HEAD_DIM, k + ": head_dim " + std::to_string(sh.head_dim) +
                                                             " is above " + std::to_string(AKUNU_FLASH_MAX_HEAD_DIM));
    const size_t q_dim = size_t(sh.n_heads) * sh.head_dim;
    AKUNU_CHECK(f.q_stride >= q_dim && f.out_stride >= q_dim, k + ": row strides must cover n_heads * head_dim");
    check_fits(q, (f.rows - 1) * size_t(f.q_stride) + q_dim, DType::kF32, kernel, "q");
    check_cache(cache, sh.n_kv_heads, sh.max_len, sh.head_dim, kernel);
    check_dtype(f.out_dtype, {DType::kF32, DType::kF16}, kernel);
    check_fits(out, (f.rows - 1) * size_t(f.out_stride) + q_dim, f.out_dtype, kernel, "out");
    FlashAttentionParams p{
        {sh.n_heads, sh.n_kv_heads, sh.head_dim, sh.max_len, sh.window, sh.scale, sh.softcap, 0, cache_rows, 0},
        checked_u32(f.rows, kernel),
        f.q_stride,
        f.out_stride};
    set_recent(p.a, cache);
    return p;
}

}  // namespace launch

void flash_attention(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out,
                     const Binding& step, const FlashShape& f) {
    const AttentionShape& sh = f.heads;
    AKUNU_CHECK(sh.head_dim % 8 == 0, "flash_attention: head_dim " + std::to_string(sh.head_dim) +
                                          " must be a multiple of 8 up to " + std::to_string(AKUNU_FLASH_MAX_HEAD_DIM));
    const DeviceProfile& d = s.device().profile();
    AKUNU_CHECK(d.subgroup_shuffle && d.subgroup_size >= 8,
                "flash_attention needs subgroup shuffles over at least 8 lanes");
    const FlashAttentionParams p = flash_params(q, cache, out, f, cache.cache_rows, "flash_attention");
    check_bytes(step, sizeof(StepState), "flash_attention", "step");
    const bool coopmat = flash_attention_coopmat(d, cache, sh.head_dim);
    const bool half_out = f.out_dtype == DType::kF16;
    AKUNU_CHECK(coopmat || !half_out,
                "flash_attention: an f16 output needs the cooperative-matrix kernel (flash_attention_coopmat)");
    const uint32_t block_rows = coopmat ? AKUNU_FLASH_CM_ROWS : AKUNU_FLASH_ROWS;
    const uint32_t blocks = (f.rows + block_rows - 1) / block_rows;
    AKUNU_CHECK(blocks <= d.max_workgroup_count_x && sh.n_heads <= 65535,
                "flash_attention: too many rows or heads for one dispatch");
    const Grid grid{blocks, sh.n_heads, ChunkRows::Axis::kX};  // blocks of query rows along x
    if (coopmat) {
        emit(s, "flash_cm_d" + std::to_string(sh.head_dim) + (half_out ? "_f16" : ""), {},
             {q, cache.k, cache.v, out, step}, p, grid);
        return;
    }
    emit(s, attention_variant("flash_attention", cache), {sh.head_dim / 8},
         with_recent(cache_bindings({q, cache.k, cache.v, out, step}, cache), cache, "flash_attention"), p, grid);
}

bool flash_attention_coopmat(const DeviceProfile& d, const KvBindings& cache, uint32_t head_dim) {
    if (!d.tuning.flash_coopmat) return false;  // A/B against the scalar kernel
    return d.gemm_coopmat && cache.dtype == KvDType::kF16 && cache.rows == KvRows::kFull &&
           (head_dim == 64 || head_dim == 128);
}

void gated_activation(DispatchSink& s, Activation act, const Binding& gate, const Binding& up, const Binding& out,
                      size_t n, DType out_dtype, uint32_t max_rows) {
    check_dtype(out_dtype, {DType::kF32, DType::kF16}, "act out");
    check_fits(gate, n, DType::kF32, "act", "gate");
    check_fits(up, n, DType::kF32, "act", "up");
    check_fits(out, n, out_dtype, "act", "out");
    const char* kernel = act == Activation::kSilu       ? "act_silu"
                         : act == Activation::kGeluTanh ? "act_gelu_tanh"
                                                        : nullptr;
    AKUNU_CHECK(kernel, "act: this activation has no gated kernel yet");
    ActParams p{checked_u32(n, "act: n")};
    Grid grid = grid_for(s, (n + kElementwiseGroup - 1) / kElementwiseGroup);
    AKUNU_CHECK(!max_rows || (s.chunk_rows() && s.device().profile().indirect_counts),
                "act: a row window needs a chunk's table on a device with indirect counts");
    grid.max_rows = max_rows;
    emit(s, std::string(kernel) + (out_dtype == DType::kF16 ? "_f16" : ""), {}, {gate, up, out}, p, grid);
}

void sample(DispatchSink& s, const Binding& logits, const Binding& token_ids, const Binding& logprobs,
            const Binding& step, const Binding& sampler, size_t n, uint32_t out_slot, size_t rows, size_t sequences,
            const ScoredTargets* scored) {
    check_fits(logits, rows * n, DType::kF32, "sample", "logits");
    check_fits(token_ids, out_slot + rows, DType::kU32, "sample", "token_ids");
    check_fits(logprobs, out_slot + rows, DType::kF32, "sample", "logprobs");
    check_bytes(step, sizeof(StepState) + (sequences ? rows * sizeof(BatchRow) : 0), "sample", "step");
    check_bytes(sampler, sizeof(SamplerState) * std::max<size_t>(sequences, 1), "sample", "sampler");
    const DeviceProfile& d = s.device().profile();
    AKUNU_CHECK(rows <= d.max_workgroup_count_x, "sample: too many rows for one dispatch");
    // A CPU device runs a workgroup's invocations in turn: fewer of them, less barrier cost.
    const uint32_t group = std::min<uint32_t>(d.type == DeviceType::kCpu ? 256 : 1024, d.max_workgroup_invocations);
    SampleParams p{checked_u32(n, "sample: n"), out_slot};
    // A batched step's rows follow its row count (the kernel skips rows past it).
    const Grid grid{uint32_t(rows), 1, sequences ? ChunkRows::Axis::kX : ChunkRows::Axis::kNone};
    if (!sequences) return emit(s, "sample", {group}, {logits, token_ids, logprobs, step, sampler}, p, grid);
    AKUNU_CHECK(scored, "sample: a batched step's sampler needs its scored targets");
    check_fits(scored->targets, rows, DType::kU32, "sample", "targets");
    check_fits(scored->logprobs, rows, DType::kF32, "sample", "target_logprobs");
    check_fits(scored->is_argmax, rows, DType::kU32, "sample", "target_is_argmax");
    emit(s, "sample_batch", {group},
         {logits, token_ids, logprobs, step, sampler, scored->logprobs, scored->is_argmax, scored->targets}, p, grid);
}

// ---- Encoders (bert) --------------------------------------------------------------------------

void activation(DispatchSink& s, Activation act, const Binding& x, const Binding& out, size_t n) {
    check_fits(x, n, DType::kF32, "act", "x");
    check_fits(out, n, DType::kF32, "act", "out");
    AKUNU_CHECK(act == Activation::kGelu, "act: this activation has no ungated kernel yet");
    ActParams p{checked_u32(n, "act: n")};
    // act_gelu is ungated: binding 1 (up) is not read, so x stands in for it.
    emit(s, "act_gelu", {}, {x, x, out}, p, grid_for(s, (n + kElementwiseGroup - 1) / kElementwiseGroup));
}

void to_half(DispatchSink& s, const Binding& x, const Binding& out, size_t n) {
    check_fits(x, n, DType::kF32, "to_half", "x");
    check_fits(out, n, DType::kF16, "to_half", "out");
    ActParams p{checked_u32(n, "to_half: n")};
    // act.comp ungated: binding 1 (up) is not read, so x stands in for it.
    emit(s, "to_half", {}, {x, x, out}, p, grid_for(s, (n + kElementwiseGroup - 1) / kElementwiseGroup));
}

void layernorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& b, const Binding& y,
               const Binding& step, size_t rows, size_t dim, float eps) {
    check_fits(x, rows * dim, DType::kF32, "layernorm", "x");
    check_fits(w, dim, DType::kF32, "layernorm", "w");
    check_fits(b, dim, DType::kF32, "layernorm", "b");
    check_fits(y, rows * dim, DType::kF32, "layernorm", "y");
    check_bytes(step, sizeof(StepState), "layernorm", "step");
    AKUNU_CHECK(eps >= 0.0f, "layernorm: eps must be >= 0");
    LayerNormParams p{checked_u32(rows, "layernorm: rows"), checked_u32(dim, "layernorm: dim"), eps};
    emit(s, "layernorm", {reduce_group(s)}, {x, w, b, y, step}, p, grid_for(s, rows));
}

void pool(DispatchSink& s, const Binding& h, const Binding& texts, const Binding& out, size_t rows, size_t dim,
          size_t max_texts) {
    check_fits(h, rows * dim, DType::kF32, "pool", "h");
    check_fits(texts, AKUNU_POOL_HEADER + 2 * max_texts, DType::kU32, "pool", "texts");
    check_fits(out, max_texts * dim, DType::kF32, "pool", "out");
    PoolParams p{checked_u32(dim, "pool: dim"), checked_u32(max_texts, "pool: max_texts")};
    emit(s, "pool", {reduce_group(s)}, {h, texts, out}, p, grid_for(s, max_texts));
}

}  // namespace akunu::kernels
