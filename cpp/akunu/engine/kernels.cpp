// Argument checks, variant choice and workgroup geometry for the kernels in kernels.h (the prefill
// GEMMs: kernels_gemm.cpp; what the launcher files share: kernel_launch.h).
#include "akunu/engine/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "akunu/formats/tiles.h"
#include "akunu/core/error.h"
#include "akunu/engine/kernel_launch.h"
#include "gemm_tiles.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

namespace {

// Elementwise kernels use 256 invocations per workgroup (their local_size_x).
constexpr uint32_t kElementwiseGroup = 256;

std::string variant(const char* kernel, DType dtype) { return std::string(kernel) + "_" + dtype_traits(dtype).name; }

// Weight types with GEMV/GEMM/embedding variants, and the variant suffix of each.
const struct { TensorType type; const char* suffix; } kWeightVariants[] = {
    {TensorType::F32, "f32"},   {TensorType::F16, "f16"},   {TensorType::BF16, "bf16"},
    {TensorType::Q8_0, "q8_0"}, {TensorType::Q4_0, "q4_0"}, {TensorType::Q4_1, "q4_1"},
    {TensorType::Q4_K, "q4_k"}, {TensorType::Q5_K, "q5_k"}, {TensorType::Q6_K, "q6_k"},
    {TensorType::MLX4_G32, "mlx4_g32"}, {TensorType::MLX4_G64, "mlx4_g64"}, {TensorType::MLX4_G128, "mlx4_g128"},
    {TensorType::MLX8_G32, "mlx8_g32"}, {TensorType::MLX8_G64, "mlx8_g64"}, {TensorType::MLX8_G128, "mlx8_g128"},
};

// The cache bindings a kernel reads or writes, checked against the cache layout: K and V (and
// for a quantized cache their row scales) for n_kv * cache_rows rows of head_dim, or for a
// cache in blocks the two block tables, one address per block of the context.
void check_cache(const KvBindings& c, size_t n_kv, size_t max_len, size_t head_dim, const char* kernel) {
    AKUNU_CHECK(c.dtype == KvDType::kF16 || head_dim % 8 == 0,
                std::string(kernel) + ": a quantized cache needs head_dim to be a multiple of 8");
    if (c.rows == KvRows::kBlocks) {
        const size_t blocks = (max_len + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK;
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

// A cache kernel's variant ("attention_split_int4_blocks": format, then layout) and its
// bindings: `first` (bindings 0 to 4 with K and V at 1 and 2), then a quantized cache's scales
// at 5 and 6 unless they sit in blocks.
std::string cache_variant(const char* kernel, const KvBindings& c) {
    std::string name = kernel;
    if (c.dtype != KvDType::kF16) name.append("_").append(kv_variant_suffix(c.dtype));
    if (c.rows != KvRows::kFull) name.append("_").append(kv_rows_name(c.rows));
    return name;
}
std::vector<Binding> cache_bindings(std::vector<Binding> first, const KvBindings& c) {
    if (c.dtype != KvDType::kF16 && c.rows != KvRows::kBlocks) {
        first.push_back(c.k_scales);
        first.push_back(c.v_scales);
    }
    return first;
}

uint32_t reduce_group(const DispatchSink& s) { return std::min<uint32_t>(256, s.device().profile().max_workgroup_invocations); }

// How attention_split's f16 path covers a cache row (its specialization constants TEAM and
// LANE_VECS): lanes per row, a power of two inside a subgroup and at most 32, so that one
// 16-byte vector per lane covers head_dims up to 256 on a subgroup of 32; and the vectors each
// lane loads. Fewer lanes per row (4 for a head of 64, 4 or 8 for 128) ran 1.2-1.9x slower
// behind 4,000 tokens on the H200 (bench/NOTES.md).
struct AttentionSplitShape {
    uint32_t team = 1, lane_vecs = 1;
};
AttentionSplitShape attention_split_shape(const DeviceProfile& d, uint32_t head_dim) {
    AttentionSplitShape a;
    const uint32_t vecs = head_dim / 8;
    while (a.team * 2 <= std::min({vecs, d.subgroup_size, 32u})) a.team *= 2;
    a.lane_vecs = (vecs + a.team - 1) / a.team;
    return a;
}

}  // namespace

std::string weight_variant(const char* kernel, TensorType t) {
    // Tile-major forms (formats/tiles.h): the base type's kernel name plus "_t32" (the CPU backend's
    // layout) or "_t32v" (Vulkan devices').
    if (const cpu::TileLayout* l = cpu::tile_layout(t)) return weight_variant(kernel, l->base) + l->kernel_suffix;
    for (const auto& v : kWeightVariants)
        if (v.type == t) return std::string(kernel) + "_" + v.suffix;
    throw Error(std::string(kernel) + ": weight type " + type_traits(t).name + " is not supported yet (supported: " +
                supported_weight_types() + ")");
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
    AddParams p{checked_u32(r.n, "add: n"), checked_u32(r.rows, "add: rows"), uint32_t(r.a_stride), uint32_t(r.b_stride),
                uint32_t(r.c_stride)};
    const size_t total = r.n * r.rows;
    checked_u32(total, "add: elements");
    emit(s, variant("add", dtype), {}, {a, b, c}, p, grid_for(s, (total + kElementwiseGroup - 1) / kElementwiseGroup));
}

// rmsnorm with y in y_dtype: dtype's own kernel, or f32 rows normed into halves.
static void emit_rmsnorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, DType dtype, DType y_dtype,
                         size_t rows, size_t dim, float eps, float weight_offset, size_t group, size_t group_stride) {
    check_dtype(dtype, {DType::kF32, DType::kF16}, "rmsnorm");
    AKUNU_CHECK(y_dtype == dtype || (dtype == DType::kF32 && y_dtype == DType::kF16), "rmsnorm: y is x's dtype, or f16 for f32 x");
    AKUNU_CHECK(group > 0 && rows % group == 0, "rmsnorm: rows must be a whole number of groups");
    if (group_stride == 0) group_stride = group * dim;
    AKUNU_CHECK(group_stride >= group * dim, "rmsnorm: group_stride is shorter than a group of rows");
    const size_t extent = (rows / group - 1) * group_stride + group * dim;
    check_fits(x, extent, dtype, "rmsnorm", "x");
    check_fits(w, dim, dtype, "rmsnorm", "w");
    check_fits(y, extent, y_dtype, "rmsnorm", "y");
    AKUNU_CHECK(eps >= 0.0f, "rmsnorm: eps must be >= 0");
    RmsNormParams p{checked_u32(rows, "rmsnorm: rows"), checked_u32(dim, "rmsnorm: dim"), eps, weight_offset,
                    checked_u32(group, "rmsnorm: group"), checked_u32(group_stride, "rmsnorm: group_stride")};
    const std::string kernel = variant("rmsnorm", dtype) + (y_dtype != dtype ? "_f16" : "");
    // 4-vectors where every row and binding starts on 16 bytes (rmsnorm.comp VEC).
    const bool vec4 = dim % 4 == 0 && group_stride % 4 == 0 && x.offset % 16 == 0 && w.offset % 16 == 0 && y.offset % 16 == 0;
    emit(s, kernel, {reduce_group(s), vec4 ? 4u : 1u}, {x, w, y}, p, grid_for(s, rows));
}

void rmsnorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, DType dtype, size_t rows, size_t dim,
             float eps, float weight_offset, size_t group, size_t group_stride) {
    emit_rmsnorm(s, x, w, y, dtype, dtype, rows, dim, eps, weight_offset, group, group_stride);
}

void rmsnorm_to_f16(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, size_t rows, size_t dim, float eps,
                    float weight_offset) {
    emit_rmsnorm(s, x, w, y, DType::kF32, DType::kF16, rows, dim, eps, weight_offset, 1, 0);
}

bool weight_type_supported(TensorType type) {
    if (const cpu::TileLayout* l = cpu::tile_layout(type)) type = l->base;
    for (const auto& v : kWeightVariants)
        if (v.type == type) return true;
    return false;
}

std::string supported_weight_types() {
    std::string out;
    for (const auto& v : kWeightVariants) out += (out.empty() ? "" : ", ") + std::string(type_traits(v.type).name);
    return out;
}

namespace {

// gemv_dot.comp's geometry: workgroup size, rows per subgroup, 16-byte chunks per invocation
// and row in flight (sg_rows * chunks uvec4 registers), and elements of x per table.
struct GemvDotShape {
    uint32_t group = 512, sg_rows = 1, chunks = 4, slice = 8192, ahead = 0;
};

// Measured on the H200 over the 1b and llama2-7b decode shapes (bench/NOTES.md): 512
// invocations, one row per subgroup, tables of 8192 elements of x (k = 11008 in two slices);
// the LM heads' 32000 rows of Q8_0 and Q4_1 run faster with 4 rows per subgroup, which share
// each table entry they read.
GemvDotShape gemv_dot_shape(const DeviceProfile& d, TensorType wtype, size_t rows, size_t k, bool float_entries) {
    GemvDotShape g;
    if (rows >= 16384 && wtype != TensorType::Q4_0) g.sg_rows = 4, g.chunks = 2;
    // Rows past one table (the 7b down projection's 11008) rebuild the table per slice: word
    // GEMVs share each entry over two rows there and load the next chunks during the products
    // (4096 x 11008: 25.9 -> 21.0 us Q4_0, 32.3 -> 26.4 us Q8_0, over three runs).
    if (float_entries && k > g.slice) g.sg_rows = 2, g.chunks = 2, g.ahead = 1;
    if (const char* e = std::getenv("AKUNU_GEMV_SHAPE"))  // experiments: "group:sg_rows:chunks[:slice[:ahead]]"
        std::sscanf(e, "%u:%u:%u:%u:%u", &g.group, &g.sg_rows, &g.chunks, &g.slice, &g.ahead);
    g.group = std::min(g.group, d.max_workgroup_invocations);
    // The table holds an entry per 4 bytes of a row's slice (and 4 spare entries), plus 512
    // bytes of partial sums; each invocation rounds at most 16 vec4s of x per slice. An entry is
    // 16 bytes, or as floats 4 (Q8_0) or 8 (Q4_*) values and a bias.
    const size_t block_bytes = type_traits(wtype).block_bytes;
    const size_t entry = !float_entries ? 16 : wtype == TensorType::Q8_0 ? 20 : 36;
    const size_t fits = (size_t(d.shared_memory_bytes) - 512 - 4 * entry) / entry * 128 / block_bytes / 256 * 256;
    g.slice = uint32_t(std::min<size_t>({g.slice, k, fits, size_t(g.group) * 64 / 256 * 256}));
    return g;
}

}  // namespace

namespace {
// The 32-element block formats that the word, integer-dot and gemv.comp W_LANE_X paths read.
bool block32(TensorType wtype) {
    return wtype == TensorType::Q8_0 || wtype == TensorType::Q4_0 || wtype == TensorType::Q4_1;
}
// Their tile-major forms (formats/tiles.h), which Vulkan devices read with gemv_tiles.comp.
bool tiles32(TensorType wtype) {
    const cpu::TileLayout* l = cpu::tile_layout(wtype);
    return l && block32(l->base);
}

// gemv_tiles.comp's geometry: invocations per row of a tile (the workgroup is 32 times that),
// blocks each invocation loads before multiplying, and blocks of x staged per pass. Measured
// on an H200 (bench/NOTES.md: 1b and 7b decode, Q8_0 and Q4_0): 16 x 2 beat 16 x 8, 8 x 8 and
// 32 x 4 for GEMVs of many tiles; GEMVs of at most one tile per compute unit (7b's O and down,
// 1b's Q/K/V, O and down) run best as 32 x 2 with x rounded (+3-5 % against 16 x 4), and with
// fp32 x as 16 x 4 for 4-bit blocks (1b q4_0 +5 %). lavapipe runs a workgroup's invocations as loops
// between barriers, where 512 invocations cost 6x what 128 do (the shipped model's GEMVs: 137
// against 20 ms a step), and 32 (one invocation a row, one block a round) less again: decode
// steps of SmolLM2 312 -> 175 ms, 1b q4_0 1,267 -> 941, 1b q8_0 1,633 -> 1,273 (bench/NOTES.md).
struct GemvTilesShape {
    uint32_t split = 16, units = 2, slice = 128, probe = 0;  // probe: gemv_tiles.comp PROBE, 0 outside experiments
};
GemvTilesShape gemv_tiles_shape(const DeviceProfile& d, TensorType wtype, size_t k, size_t tiles, bool int_x) {
    GemvTilesShape g;
    if (d.type == DeviceType::kCpu) g.split = 1, g.units = 1;
    const bool few = tiles <= d.compute_units;  // one workgroup per compute unit at most
    if (few && int_x) {
        // 1,024 invocations and x for the whole row staged at once (up to ~600 blocks fit in
        // 48 KiB): twice the warps on each compute unit, and one staging pass with one barrier
        // where a 7b down projection had three.
        g.split = 32, g.slice = 1024;
    } else if (int_x && d.compute_units > 0 && k < 4096) {
        // Short rows (1b's 2,048): 8 invocations a row, so that each still takes 8 blocks.
        g.split = 8;
    } else if (few && type_traits(cpu::tile_layout(wtype)->base).block_bytes < 32) {
        // 4-bit blocks (18 or 20 bytes); Q8_0's 34 already keep twice the bytes in flight per unit.
        g.units = 4;
    }
    // Experiments: "split:units[:slice[:probe]]" for every tile GEMV, and for those of few tiles.
    if (const char* e = std::getenv("AKUNU_GEMV_TILES"))
        std::sscanf(e, "%u:%u:%u:%u", &g.split, &g.units, &g.slice, &g.probe);
    if (const char* e = std::getenv("AKUNU_GEMV_TILES_FEW"); e && few)
        std::sscanf(e, "%u:%u:%u:%u", &g.split, &g.units, &g.slice, &g.probe);
    g.split = std::clamp(g.split, 1u, std::min(32u, d.max_workgroup_invocations / 32));  // gemv_tiles.comp MAX_SPLIT
    g.units = std::clamp(g.units, 1u, 8u);                                                // MAX_UNITS
    // Shared memory per block: 128 bytes of float x or 64 of rounded x, and 8 of sums; then
    // 4 KiB of partial sums and 512 bytes of sums of squares.
    const uint32_t fits = (d.shared_memory_bytes - 4096 - 512) / (int_x ? 72 : 136);
    g.slice = std::clamp<uint32_t>(std::min<uint32_t>(g.slice, uint32_t(k / 32)), 1u, fits);
    return g;
}
// Float weights (and the CPU backend's tiles of them), which gemv.comp reads as vec4s.
bool float_weights(TensorType wtype) {
    const cpu::TileLayout* l = cpu::tile_layout(wtype);
    return type_traits(l ? l->base : wtype).block_size == 1;
}

// Bindings 8 to 12 of a GEMV with a folded rope_kv (rope_fold.glsl): the RoPE tables, the K and
// V caches and the step. Without one, x and y stand in (never read).
void append_rope_bindings(std::vector<Binding>& bindings, const GemvRopeKv* rope, const Binding& x, const Binding& y) {
    if (rope)
        bindings.insert(bindings.end(), {rope->cos, rope->sin, rope->cache.k, rope->cache.v, rope->step});
    else
        bindings.insert(bindings.end(), {x, x, y, y, x});
}

// gemv.comp's geometry: invocations and rows per workgroup (MAX_ROWS), and what each invocation
// loads of a row before multiplying (UNITS): vec4s of a float row, or units (a lane's 4 code
// bytes) of a 32-element block. Measured on an H200 (bench/NOTES.md, 1b and 7b decode): float
// rows 256 x 4 rows x 2 vec4s (+1-3 % over 128 x 4 x 1; 64, 2 or 8 rows and 4 vec4s were not
// faster), Q8_0 two units and the 4-bit formats one. CPU-type devices take one subgroup a
// workgroup (below), where wider workgroups cost more than they do on a GPU.
struct GemvCompShape {
    uint32_t group = 128, rows = 4, units = 1, wide = 0;
};
GemvCompShape gemv_comp_shape(const DeviceProfile& d, TensorType wtype) {
    GemvCompShape g;
    // Float rows on GPUs: 256 invocations, 2 vec4s of each of 4 rows in flight; 16-bit floats
    // read 8 weights per 16-byte load (gemv.comp WIDE) with 128 invocations, 1 load per row
    // (+3-4 % decode on the H200 against 256 x 2 of 8-byte loads, bench/NOTES.md).
    if (float_weights(wtype) && d.type != DeviceType::kCpu) g.group = 256, g.units = 2;
    if ((wtype == TensorType::F16 || wtype == TensorType::BF16) && d.type != DeviceType::kCpu) g.group = 128, g.units = 1, g.wide = 1;
    if (wtype == TensorType::Q8_0) g.units = 2;
    // CPU-type devices (lavapipe) run a workgroup's invocations as loops between barriers: one
    // subgroup a workgroup, 8 float rows (16-bit ones 8 weights a load) or 4 of blocks. Decode of
    // a 300m f16 file 427 -> 150 ms a step, of q4_k 459 -> 234 (bench/NOTES.md).
    if (d.type == DeviceType::kCpu) {
        g.group = std::max(d.subgroup_size, 1u);
        g.rows = float_weights(wtype) ? 8 : 4;
        g.wide = wtype == TensorType::F16 || wtype == TensorType::BF16;
    }
    if (const char* e = std::getenv("AKUNU_GEMV_ROWS"))  // experiments: "invocations:rows[:units[:wide]]"
        std::sscanf(e, "%u:%u:%u:%u", &g.group, &g.rows, &g.units, &g.wide);
    g.group = std::clamp(g.group, 1u, d.max_workgroup_invocations);
    g.rows = std::clamp(g.rows, 1u, 8u);    // gemv.comp MAX_ROWS
    g.units = std::clamp(g.units, 1u, 4u);  // gemv.comp MAX_UNITS
    return g;
}

// One gemv.comp dispatch: workgroups of `rows` rows (gemv.comp ROWS) of each of p's matrices.
// Float variants take the second and third matrix at bindings 4 and 5, their y at 6 and 7 (the
// first ones again where there are fewer) and a folded rope_kv's at 8 to 12; the block formats
// have bindings 0 to 3 only. `gated` (gemv.comp GATED, AKUNU_GEMV_X: off) pairs gate rows of
// W0 with the same rows of W1 in each workgroup and writes act(gate) * up to y[0].
void emit_gemv_comp(DispatchSink& s, const std::array<Binding, 3>& w, const std::array<Binding, 3>& y, TensorType wtype,
                    const Binding& x, const Binding& second, GemvParams p, const GemvRopeKv* rope = nullptr,
                    uint32_t gated = AKUNU_GEMV_X, const GemvNormOut* norm_out = nullptr, const GemvHandoff* handoff = nullptr) {
    const GemvCompShape g = gemv_comp_shape(s.device().profile(), wtype);
    const bool pairs = gated != AKUNU_GEMV_X;
    // A RoPE pair's rows in one workgroup; gate and up rows in halves of one.
    const uint32_t group_rows = rope || pairs ? g.rows + g.rows % 2 : g.rows;
    std::vector<Binding> bindings{w[0], x, y[0], second};
    if (float_weights(wtype)) {
        bindings.insert(bindings.end(), {w[1], w[2], y[1], y[2]});
        append_rope_bindings(bindings, rope, x, y[0]);
        if (norm_out)
            bindings.insert(bindings.end(), {norm_out->weight, norm_out->normed, norm_out->sums});
        else
            bindings.insert(bindings.end(), {x, y[0], y[0]});
        bindings.push_back(handoff ? handoff->counters : y[0]);  // binding 16
    }
    uint32_t handoff_bits = 0;
    if (handoff) {
        p.handoff_wait = handoff->wait, p.handoff_wait_count = handoff->wait_count;
        p.handoff_clear = handoff->clear, p.handoff_clear_count = handoff->clear_count;
        handoff_bits = (handoff->wait ? 2u : 0u) | (handoff->clear_count ? 4u : 0u);
    }
    const size_t groups = pairs ? (size_t(p.rows) + group_rows / 2 - 1) / (group_rows / 2)
                                : (size_t(p.rows) + group_rows - 1) / group_rows + (size_t(p.rows1) + group_rows - 1) / group_rows +
                                      (size_t(p.rows2) + group_rows - 1) / group_rows;
    emit(s, weight_variant("gemv", wtype), {g.group, group_rows, p.x_op, g.units, g.wide ? 1u : 0u, gated, handoff_bits},
         std::move(bindings), p, grid_for(s, groups), handoff && handoff->wait);
}

// What every hand-off is checked for (GemvHandoff): that its kernel takes one on this device
// (`takes`: gemv_hands_off or attention_hands_off), and that each slot it names lies in its
// counters.
void check_handoff(const GemvHandoff* h, bool takes, const char* kernel) {
    if (!h) return;
    AKUNU_CHECK(takes, std::string(kernel) + ": this device or these weights take no hand-off (gemv_hands_off)");
    const uint32_t cleared = h->clear_count ? h->clear + h->clear_count - 1 : 0;
    check_bytes(h->counters, handoff_counters_bytes(std::max({h->signal, h->wait, cleared})), kernel, "counters");
}

// One gemv_tiles.comp dispatch: a workgroup per tile of each of p's matrices (one to three).
// Bindings: W0, x, y0, the op's second input (or x again), W1, W2, y1, y2, then the RoPE
// tables, the K and V caches and the step of a folded rope_kv, then a hand-off's counters
// (y0 stands in where there is none: a binding the kernel writes anyway, so no false hazard).
void emit_gemv_tiles(DispatchSink& s, const std::array<Binding, 3>& w, const std::array<Binding, 3>& y, TensorType wtype,
                     const Binding& x, const Binding& second, GemvParams p, XRounding rounding,
                     const GemvRopeKv* rope = nullptr, const GemvHandoff* handoff = nullptr) {
    const uint32_t tiles = gemv_tiles_groups({p.rows, p.rows1, p.rows2});
    const bool int_dot = rounding != XRounding::kFloat;
    const GemvTilesShape g = gemv_tiles_shape(s.device().profile(), wtype, p.k, tiles, int_dot);
    std::vector<Binding> bindings{w[0], x, y[0], second, w[1], w[2], y[1], y[2]};
    append_rope_bindings(bindings, rope, x, y[0]);
    uint32_t handoff_bits = 0;
    if (handoff) {
        // The waiting side counts workgroups; one row of them keeps that count exact.
        AKUNU_CHECK(tiles <= s.device().profile().max_workgroup_count_x,
                    "gemv: a hand-off needs the GEMV's " + std::to_string(tiles) + " workgroups in one row of the grid");
        p.handoff_signal = handoff->signal, p.handoff_wait = handoff->wait, p.handoff_wait_count = handoff->wait_count;
        p.handoff_clear = handoff->clear, p.handoff_clear_count = handoff->clear_count;
        handoff_bits = (handoff->signal ? 1u : 0u) | (handoff->wait ? 2u : 0u) | (handoff->clear_count ? 4u : 0u);
    }
    bindings.push_back(handoff ? handoff->counters : y[0]);
    emit(s, weight_variant(int_dot ? "gemv_dot" : "gemv", wtype),
         {32 * g.split, g.units, p.x_op, g.slice, std::min(g.probe, 15u), rounding == XRounding::kInt16 ? 16u : 8u,
          handoff_bits},
         std::move(bindings), p, grid_for(s, tiles), handoff && handoff->wait);
}
bool word_rows(TensorType wtype, size_t k) {
    return block32(wtype) && k % 256 == 0;
}

// The checks gemv() and gemv_parts() share, on x and the input op, and their parameters for
// matrices of rows[0], rows[1] and rows[2] rows (0: none).
GemvParams gemv_params(const std::array<size_t, 3>& rows, size_t k, bool accumulate, const Binding& x,
                       const GemvInput* input, const char* kernel) {
    check_fits(x, k, DType::kF32, kernel, "x");
    const uint32_t op = input ? input->op : AKUNU_GEMV_X;
    AKUNU_CHECK(op <= AKUNU_GEMV_RMSNORM_READY, std::string(kernel) + ": unknown input op " + std::to_string(op));
    if (op == AKUNU_GEMV_RMSNORM_READY) {
        AKUNU_CHECK(input->partials > 0, std::string(kernel) + ": a norm handed forward needs its sums of squares");
        check_fits(input->second, input->partials, DType::kF32, kernel, "sums of squares");
    } else if (op != AKUNU_GEMV_X) {
        check_fits(input->second, k, DType::kF32, kernel, op == AKUNU_GEMV_RMSNORM ? "norm weight" : "up");
    }
    const std::string what = std::string(kernel) + ": rows";
    AKUNU_CHECK(rows[1] <= 0xFFFFFFFFu && rows[2] <= 0xFFFFFFFFu, what + " must be below 2^32");
    GemvParams p{checked_u32(rows[0], what.c_str()), checked_u32(k, (std::string(kernel) + ": k").c_str()), accumulate ? 1u : 0u,
                 op, input ? input->eps : 0.0f, input ? input->weight_offset : 0.0f, uint32_t(rows[1]), uint32_t(rows[2])};
    p.norm_partials = input ? input->partials : 0u;
    return p;
}
// A norm handed forward rides only on gemv.comp's float path (its workgroups' rows are the
// residual rows they sum, by a subgroup add over the rows' invocations); the tile, integer-dot
// and word GEMVs do not take it.
bool takes_norm_ready(const DeviceProfile& d, TensorType wtype) {
    return !d.cpu_backend && float_weights(wtype) && d.subgroup_size >= gemv_comp_shape(d, wtype).rows;
}
}  // namespace

// Tiles take any k of whole blocks; the same rows as the row-major kernel round x, so that where
// x is rounded does not depend on the layout.
bool gemv_int_dot(const DeviceProfile& d, TensorType wtype, size_t k) {
    return d.gemv_int_dot && (word_rows(wtype, k) || (tiles32(wtype) && k % 256 == 0));
}

size_t handoff_counters_bytes(uint32_t slots) { return (size_t(slots) + 1) * 4; }

// Hand-offs pay only between dispatches of at most one workgroup per compute unit (kernels.h).
static bool hands_off_at(const DeviceProfile& d, uint32_t workgroups) {
    return d.gemv_handoff && !d.cpu_backend && (d.compute_units == 0 || workgroups <= d.compute_units);
}

bool gemv_hands_off(const DeviceProfile& d, TensorType wtype, uint32_t tiles) {
    return tiles32(wtype) && hands_off_at(d, tiles);
}

bool gemv_waits_for_attention(const DeviceProfile& d, TensorType wtype) {
    return float_weights(wtype) && !tiles32(wtype) && d.gemv_handoff && !d.cpu_backend;
}

bool gemv_takes_handoff(const DeviceProfile& d, TensorType wtype) {
    return gemv_hands_off(d, wtype, 0) || gemv_waits_for_attention(d, wtype);
}

bool attention_hands_off(const DeviceProfile& d, uint32_t n_heads) { return hands_off_at(d, n_heads); }

uint32_t gemv_tiles_groups(const std::array<size_t, 3>& rows) {
    const size_t tiles = (rows[0] + 31) / 32 + (rows[1] + 31) / 32 + (rows[2] + 31) / 32;
    AKUNU_CHECK(tiles <= 0xFFFFFFFFu, "gemv: too many rows");
    return uint32_t(tiles);
}

bool gemv_int16(const DeviceProfile& d, TensorType wtype) { return d.gemv_int_dot && !d.cpu_backend && tiles32(wtype); }

XRounding engine_x_rounding(const DeviceProfile& d) {
    return d.int8_activations ? XRounding::kInt8 : d.float_x ? XRounding::kFloat : XRounding::kInt16;
}

XRounding gemv_x_rounding(const DeviceProfile& d, TensorType wtype, size_t k, XRounding asked) {
    if (asked == XRounding::kInt8 && gemv_int_dot(d, wtype, k)) return asked;
    if (asked == XRounding::kInt16 && gemv_int16(d, wtype)) return asked;
    return XRounding::kFloat;
}

bool gemv_words(const DeviceProfile& d, TensorType wtype, size_t k) { return d.gemv_words && word_rows(wtype, k); }

bool gemv_folds_norm(const DeviceProfile& d, TensorType wtype, size_t k) {
    return type_traits(wtype).block_size == 1 || block32(wtype) || gemv_folds_activation(d, wtype, k);
}

bool gemv_folds_activation(const DeviceProfile& d, TensorType wtype, size_t k) {
    return d.cpu_backend || tiles32(wtype) || (d.int8_activations && gemv_int_dot(d, wtype, k)) || gemv_words(d, wtype, k);
}

GemvInput GemvInput::rmsnorm(const Binding& weight, float eps, float weight_offset) {
    return {AKUNU_GEMV_RMSNORM, weight, eps, weight_offset};
}

GemvInput GemvInput::rmsnorm_ready(const Binding& sums, uint32_t partials, float eps) {
    return {AKUNU_GEMV_RMSNORM_READY, sums, eps, 0.0f, partials};
}

bool gemv_hands_norm_forward(const DeviceProfile& d, TensorType producer, TensorType consumer) {
    return d.norm_forward && takes_norm_ready(d, producer) && takes_norm_ready(d, consumer);
}

uint32_t gemv_norm_partials(const DeviceProfile& d, TensorType wtype, size_t rows) {
    const uint32_t group_rows = gemv_comp_shape(d, wtype).rows;
    return uint32_t((rows + group_rows - 1) / group_rows);
}

GemvInput GemvInput::gated(Activation act, const Binding& up) {
    AKUNU_CHECK(act != Activation::kGelu, "gemv: GELU (erf) has no gated form to fold");
    return {act == Activation::kSilu ? AKUNU_GEMV_SILU_GATE : AKUNU_GEMV_GELU_TANH_GATE, up};
}

void gemv(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y, size_t rows, size_t k,
          bool accumulate, const GemvInput* input, XRounding rounding, const GemvHandoff* handoff,
          const GemvNormOut* norm_out) {
    const TensorTypeTraits& t = type_traits(wtype);
    check_row_blocks(t, k, "gemv", "k");
    check_bytes(w, tensor_bytes(t, uint64_t(rows) * k, "gemv W"), "gemv", "W");
    check_fits(y, rows, DType::kF32, "gemv", "y");
    GemvParams p = gemv_params({rows, 0, 0}, k, accumulate, x, input, "gemv");
    const DeviceProfile& d = s.device().profile();
    AKUNU_CHECK(p.x_op != AKUNU_GEMV_RMSNORM_READY || takes_norm_ready(d, wtype),
                std::string("gemv: ") + t.name + " weights take no norm handed forward on this device");
    if (norm_out) {
        AKUNU_CHECK(takes_norm_ready(d, wtype),
                    std::string("gemv: ") + t.name + " weights hand no norm forward on this device");
        AKUNU_CHECK(accumulate && p.x_op != AKUNU_GEMV_RMSNORM && p.x_op != AKUNU_GEMV_RMSNORM_READY,
                    "gemv: only a GEMV that adds into the residual stream, with no norm of its own, hands a norm forward");
        AKUNU_CHECK(!handoff || !handoff->signal, "gemv: a GEMV that hands a norm forward signals no hand-off");
        check_fits(norm_out->weight, rows, DType::kF32, "gemv", "next norm weight");
        check_fits(norm_out->normed, rows, DType::kF32, "gemv", "normed");
        check_fits(norm_out->sums, gemv_norm_partials(d, wtype, rows), DType::kF32, "gemv", "sums of squares");
        p.norm_out = 1;
        p.norm_out_offset = norm_out->weight_offset;
    }
    // With x as it is, binding 3 is unused: x stands in for it.
    const std::vector<Binding> bindings{w, x, y, p.x_op != AKUNU_GEMV_X ? input->second : x};
    const XRounding taken = gemv_x_rounding(d, wtype, k, rounding);
    check_handoff(handoff, gemv_takes_handoff(d, wtype), "gemv");
    if (handoff && gemv_waits_for_attention(d, wtype))
        AKUNU_CHECK(!handoff->signal && k % 4 == 0, "gemv: float weights only wait for a hand-off, over rows of a multiple of 4");
    if (tiles32(wtype) && !d.cpu_backend) {
        emit_gemv_tiles(s, {w, w, w}, {y, y, y}, wtype, x, bindings[3], p, taken, nullptr, handoff);
        return;
    }
    const bool int_dot = taken == XRounding::kInt8;
    if (int_dot || gemv_words(d, wtype, k)) {
        const GemvDotShape g = gemv_dot_shape(d, wtype, rows, k, !int_dot);
        const uint32_t group_rows = std::max(1u, g.group / std::max(1u, d.subgroup_size)) * g.sg_rows;
        emit(s, weight_variant(int_dot ? "gemv_dot" : "gemv_words", wtype), {g.group, group_rows, g.sg_rows | (g.chunks << 8) | (g.ahead << 16), g.slice},
             bindings, p, grid_for(s, (rows + group_rows - 1) / group_rows));
        return;
    }
    emit_gemv_comp(s, {w, w, w}, {y, y, y}, wtype, x, bindings[3], p, nullptr, AKUNU_GEMV_X, norm_out, handoff);
}

bool gemv_fuses_gate_up(const DeviceProfile& d, TensorType wtype, size_t k, Activation act) {
    return gemv_fuses_parts(d, wtype, k) && float_weights(wtype) && act != Activation::kGelu;
}

void gemv_gate_up(DispatchSink& s, const Binding& w_gate, const Binding& w_up, TensorType wtype, const Binding& x,
                  const Binding& y, size_t rows, size_t k, Activation act, const GemvInput* input) {
    AKUNU_CHECK(gemv_fuses_gate_up(s.device().profile(), wtype, k, act),
                std::string("gemv_gate_up: ") + type_traits(wtype).name + " rows of " + std::to_string(k) +
                    " with this activation have no fused gate/up GEMV on this device");
    const TensorTypeTraits& t = type_traits(wtype);
    check_bytes(w_gate, tensor_bytes(t, uint64_t(rows) * k, "gemv W"), "gemv_gate_up", "W_gate");
    check_bytes(w_up, tensor_bytes(t, uint64_t(rows) * k, "gemv W"), "gemv_gate_up", "W_up");
    check_fits(y, rows, DType::kF32, "gemv_gate_up", "y");
    const GemvParams p = gemv_params({rows, rows, 0}, k, false, x, input, "gemv_gate_up");
    const Binding& second = p.x_op != AKUNU_GEMV_X ? input->second : x;
    const uint32_t op = GemvInput::gated(act, y).op;  // the activation's x_op code (y stands in for up)
    emit_gemv_comp(s, {w_gate, w_up, w_gate}, {y, y, y}, wtype, x, second, p, nullptr, op);
}

bool gemv_folds_rope_kv(const DeviceProfile& d, TensorType wtype, const KvBindings& cache, bool half_split) {
    return !d.cpu_backend && ((tiles32(wtype) && !half_split) || float_weights(wtype)) && cache.dtype == KvDType::kF16 &&
           cache.rows != KvRows::kBlocks;
}

bool gemv_fuses_parts(const DeviceProfile& d, TensorType wtype, size_t k) {
    return !d.cpu_backend && (tiles32(wtype) || (float_weights(wtype) && k % 4 == 0));
}

void gemv_parts(DispatchSink& s, const std::array<Binding, 3>& w, TensorType wtype, const Binding& x,
                const std::array<Binding, 3>& y, const std::array<size_t, 3>& rows, size_t k, const GemvInput* input,
                const GemvRopeKv* rope, XRounding rounding, const GemvHandoff* handoff) {
    AKUNU_CHECK(gemv_fuses_parts(s.device().profile(), wtype, k),
                std::string("gemv_parts: ") + type_traits(wtype).name + " matrices have no fused GEMV on this device");
    const TensorTypeTraits& t = type_traits(wtype);
    check_row_blocks(t, k, "gemv_parts", "k");
    AKUNU_CHECK(rows[0] > 0 && (rows[1] > 0 || rows[2] == 0), "gemv_parts: the matrices' rows must be given in order");
    const char* w_names[3] = {"W0", "W1", "W2"};
    const char* y_names[3] = {"y0", "y1", "y2"};
    for (size_t i = 0; i < 3 && rows[i] > 0; ++i) {
        check_bytes(w[i], tensor_bytes(t, uint64_t(rows[i]) * k, "gemv W"), "gemv_parts", w_names[i]);
        check_fits(y[i], rows[i], DType::kF32, "gemv_parts", y_names[i]);
    }
    GemvParams p = gemv_params(rows, k, false, x, input, "gemv_parts");
    AKUNU_CHECK(p.x_op != AKUNU_GEMV_RMSNORM_READY || takes_norm_ready(s.device().profile(), wtype),
                std::string("gemv_parts: ") + t.name + " weights take no norm handed forward on this device");
    if (rope) {
        const KvBindings& c = rope->cache;
        AKUNU_CHECK(gemv_folds_rope_kv(s.device().profile(), wtype, c, rope->half_split),
                    "gemv_parts: rope_kv folds only into tile-major (adjacent pairs) or float Q/K/V GEMVs and an f16 "
                    "cache of full rows or a ring");
        const uint32_t hd = rope->head_dim;
        AKUNU_CHECK(hd > 0 && hd % 2 == 0 && rows[0] % hd == 0 && rows[1] % hd == 0 && rows[1] == rows[2] && rows[1] > 0,
                    "gemv_parts: a folded rope_kv needs Q, K and V of whole heads of an even head_dim, K and V alike");
        const size_t n_kv = rows[1] / hd;
        AKUNU_CHECK(c.cache_rows > 0, "gemv_parts: the cache has no rows");
        check_cache(c, uint32_t(n_kv), c.cache_rows, hd, "gemv_parts");
        check_fits(rope->cos, size_t(rope->positions) * (hd / 2), DType::kF32, "gemv_parts", "cos");
        check_fits(rope->sin, size_t(rope->positions) * (hd / 2), DType::kF32, "gemv_parts", "sin");
        check_bytes(rope->step, sizeof(StepState), "gemv_parts", "step");
        p.rope_head_dim = hd;
        p.rope_cache_rows = c.cache_rows;
        p.rope_half_split = rope->half_split ? 1 : 0;
    }
    // Matrices past the last given are bound as the first (not read).
    const Binding& w1 = rows[1] ? w[1] : w[0];
    const Binding& w2 = rows[2] ? w[2] : w[0];
    const Binding& y1 = rows[1] ? y[1] : y[0];
    const Binding& y2 = rows[2] ? y[2] : y[0];
    const Binding& second = p.x_op != AKUNU_GEMV_X ? input->second : x;
    check_handoff(handoff, gemv_hands_off(s.device().profile(), wtype, 0), "gemv_parts");
    if (tiles32(wtype))
        emit_gemv_tiles(s, {w[0], w1, w2}, {y[0], y1, y2}, wtype, x, second, p,
                        gemv_x_rounding(s.device().profile(), wtype, k, rounding), rope, handoff);
    else
        emit_gemv_comp(s, {w[0], w1, w2}, {y[0], y1, y2}, wtype, x, second, p, rope);
}

bool dequantizes_to_f16(TensorType wtype) {
    if (tiles32(wtype)) return true;
    switch (wtype) {
        case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q4_1:
        case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K:
            return true;
        default:
            return false;
    }
}

void dequant_f16(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& out, size_t n, size_t k,
                 const Binding& step, uint32_t min_rows) {
    AKUNU_CHECK(dequantizes_to_f16(wtype), std::string("dequant_f16: ") + type_traits(wtype).name + " is not a block format");
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

void embed(DispatchSink& s, const Binding& w, TensorType wtype, size_t vocab, const Binding& token_ids, const Binding& step,
           const Binding& out, size_t dim, float scale, size_t rows) {
    const TensorTypeTraits& t = type_traits(wtype);
    check_row_blocks(t, dim, "embed", "dim");
    check_bytes(w, tensor_bytes(t, uint64_t(vocab) * dim, "embedding"), "embed", "W");
    check_fits(token_ids, rows, DType::kU32, "embed", "token_ids");
    check_fits(out, rows * dim, DType::kF32, "embed", "out");
    check_bytes(step, sizeof(StepState), "embed", "step");
    EmbedParams p{checked_u32(dim, "embed: dim"), scale, checked_u32(rows, "embed: rows"), checked_u32(vocab, "embed: vocab")};
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
    AKUNU_CHECK(cap > 0 && std::isfinite(cap), "softcap: the cap must be a positive number, found " + std::to_string(cap));
    check_fits(x, rows * n, DType::kF32, "softcap", "x");
    check_bytes(step, sizeof(StepState), "softcap", "step");
    const size_t total = rows * n;
    SoftcapParams p{checked_u32(n, "softcap: n"), checked_u32(rows, "softcap: rows"), cap};
    checked_u32(total, "softcap: elements");
    emit(s, "softcap", {}, {x, step}, p, grid_for(s, (total + kElementwiseGroup - 1) / kElementwiseGroup));
}

void rope_kv(DispatchSink& s, const Binding& qkv, const Binding& cos, const Binding& sin, const KvBindings& cache,
             const Binding& step, const RopeKvShape& sh) {
    const size_t half = sh.head_dim / 2, q_dim = size_t(sh.n_heads) * sh.head_dim, kv_dim = size_t(sh.n_kv_heads) * sh.head_dim;
    const size_t stride = sh.row_stride ? sh.row_stride : q_dim + 2 * kv_dim;
    AKUNU_CHECK(stride >= q_dim + 2 * kv_dim, "rope_kv: row_stride is shorter than a [q | k | v] row");
    check_fits(qkv, (sh.rows - 1) * stride + q_dim + 2 * kv_dim, DType::kF32, "rope_kv", "qkv");
    check_fits(cos, size_t(sh.max_len) * half, DType::kF32, "rope_kv", "cos");
    check_fits(sin, size_t(sh.max_len) * half, DType::kF32, "rope_kv", "sin");
    check_cache(cache, sh.n_kv_heads, sh.max_len, sh.head_dim, "rope_kv");
    check_bytes(step, sizeof(StepState), "rope_kv", "step");
    // The kernels' max_len is the cache's rows per head (a ring's length); blocks ignore it.
    RopeKvParams p{sh.n_heads, sh.n_kv_heads, sh.head_dim, cache.rows == KvRows::kBlocks ? sh.max_len : cache.cache_rows,
                   sh.interleaved ? 1u : 0u, sh.rotate ? 1u : 0u, checked_u32(sh.rows, "rope_kv: rows"), uint32_t(stride)};
    // Four pairs (and V elements) an invocation where every vec4 it reads or writes is whole:
    // head_dim a multiple of 8, rows and tables starting on 16 bytes.
    const bool vec4 = sh.head_dim % 8 == 0 && stride % 4 == 0 && qkv.offset % 16 == 0 && cos.offset % 16 == 0 &&
                      sin.offset % 16 == 0;
    const uint32_t per = vec4 ? 4 : 1;
    const size_t items = size_t(sh.rows) * ((size_t(sh.n_heads) + sh.n_kv_heads) * half + kv_dim) / per;
    const bool f16 = cache.dtype == KvDType::kF16;
    emit(s, f16 ? cache_variant("rope_kv", cache) : "rope_only", {per}, {qkv, cos, sin, cache.k, cache.v, step}, p,
         grid_for(s, (items + 63) / 64));
    if (f16) return;
    // kv_store: one invocation per packed word of each token's K and V rows.
    const size_t words =
        size_t(sh.rows) * kv_dim * size_t(kv_value_bits(kv_side(cache.dtype, false)) + kv_value_bits(kv_side(cache.dtype, true))) / 32;
    std::vector<Binding> bindings = {qkv, cache.k, cache.v, cache.k_scales, cache.v_scales, step};
    if (cache.rows == KvRows::kBlocks) bindings = {qkv, cache.k, cache.v, step};  // the scales sit in the blocks
    emit(s, cache_variant("kv_store", cache), {}, bindings, p, grid_for(s, (words + 63) / 64));
}

size_t attention_partial_floats(uint32_t n_heads, uint32_t head_dim, uint32_t max_len) {
    const size_t chunks = (size_t(max_len) + AKUNU_ATTENTION_CHUNK - 1) / AKUNU_ATTENTION_CHUNK;
    return size_t(n_heads) * chunks * (size_t(head_dim) + 2) + n_heads;  // then a counter per head
}

size_t attention_counters_offset(uint32_t n_heads, uint32_t head_dim, uint32_t max_len) {
    return (attention_partial_floats(n_heads, head_dim, max_len) - n_heads) * 4;
}

void attention(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& partial, const Binding& out,
               const Binding& step, const AttentionShape& sh, const GemvHandoff* handoff) {
    AKUNU_CHECK(sh.n_kv_heads > 0 && sh.n_heads % sh.n_kv_heads == 0, "attention: n_heads must be a multiple of n_kv_heads");
    AKUNU_CHECK(s.device().profile().max_workgroup_invocations >= AKUNU_ATTENTION_CHUNK,
                "attention: the device runs fewer than " + std::to_string(AKUNU_ATTENTION_CHUNK) + " invocations per workgroup");
    AKUNU_CHECK(sh.head_dim % 8 == 0 && sh.head_dim <= AKUNU_ATTENTION_CHUNK,
                "attention: head_dim " + std::to_string(sh.head_dim) + " must be a multiple of 8 up to " +
                    std::to_string(AKUNU_ATTENTION_CHUNK));
    AKUNU_CHECK(s.device().profile().subgroup_shuffle && s.device().profile().subgroup_size >= 8,
                "attention needs subgroup shuffles over at least 8 lanes");
    const size_t q_dim = size_t(sh.n_heads) * sh.head_dim;
    const uint32_t chunks = uint32_t((size_t(sh.max_len) + AKUNU_ATTENTION_CHUNK - 1) / AKUNU_ATTENTION_CHUNK);
    check_fits(q, q_dim, DType::kF32, "attention", "q");
    check_cache(cache, sh.n_kv_heads, sh.max_len, sh.head_dim, "attention");
    check_fits(partial, attention_partial_floats(sh.n_heads, sh.head_dim, sh.max_len), DType::kF32, "attention", "partial");
    check_fits(out, q_dim, DType::kF32, "attention", "out");
    AKUNU_CHECK(chunks <= 65535 && sh.n_heads <= s.device().profile().max_workgroup_count_x,
                "attention: too many heads or cache rows for one dispatch");
    AttentionParams p{sh.n_heads, sh.n_kv_heads, sh.head_dim, sh.max_len, sh.window, sh.scale, sh.softcap, chunks, cache.cache_rows,
                      handoff ? handoff->signal : 0};
    AKUNU_CHECK(!handoff || (!handoff->wait && !handoff->clear_count && handoff->signal),
                "attention: a hand-off only signals (the O GEMV waits for it)");
    check_handoff(handoff, attention_hands_off(s.device().profile(), 0), "attention");
    std::vector<Binding> bindings = cache_bindings({q, cache.k, cache.v, partial, step}, cache);
    bindings.push_back(out);  // binding 7
    bindings.push_back(handoff ? handoff->counters : out);  // binding 8 (out stands in: written anyway)
    const AttentionSplitShape a = attention_split_shape(s.device().profile(), sh.head_dim);
    // Chunks along y: a step at position pos needs pos / CHUNK + 1 of them (attention_split.comp
    // counts its arrivals from pos, not from the grid), where the table follows the position.
    emit(s, cache_variant("attention_split", cache), {a.team, a.lane_vecs}, bindings, p,
         {sh.n_heads, chunks, ChunkRows::Axis::kNone, 0, 0, AKUNU_ATTENTION_CHUNK});
}

void flash_attention(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out, const Binding& step,
                     const FlashShape& f) {
    const AttentionShape& sh = f.heads;
    AKUNU_CHECK(sh.n_kv_heads > 0 && sh.n_heads % sh.n_kv_heads == 0, "flash_attention: n_heads must be a multiple of n_kv_heads");
    AKUNU_CHECK(sh.head_dim % 8 == 0 && sh.head_dim <= AKUNU_FLASH_MAX_HEAD_DIM,
                "flash_attention: head_dim " + std::to_string(sh.head_dim) + " must be a multiple of 8 up to " +
                    std::to_string(AKUNU_FLASH_MAX_HEAD_DIM));
    const DeviceProfile& d = s.device().profile();
    AKUNU_CHECK(d.subgroup_shuffle && d.subgroup_size >= 8, "flash_attention needs subgroup shuffles over at least 8 lanes");
    const size_t q_dim = size_t(sh.n_heads) * sh.head_dim;
    AKUNU_CHECK(f.q_stride >= q_dim && f.out_stride >= q_dim, "flash_attention: row strides must cover n_heads * head_dim");
    check_fits(q, (f.rows - 1) * size_t(f.q_stride) + q_dim, DType::kF32, "flash_attention", "q");
    check_cache(cache, sh.n_kv_heads, sh.max_len, sh.head_dim, "flash_attention");
    check_dtype(f.out_dtype, {DType::kF32, DType::kF16}, "flash_attention out");
    check_fits(out, (f.rows - 1) * size_t(f.out_stride) + q_dim, f.out_dtype, "flash_attention", "out");
    check_bytes(step, sizeof(StepState), "flash_attention", "step");
    FlashAttentionParams p{{sh.n_heads, sh.n_kv_heads, sh.head_dim, sh.max_len, sh.window, sh.scale, sh.softcap, 0, cache.cache_rows, 0},
                           checked_u32(f.rows, "flash_attention: rows"), f.q_stride, f.out_stride};
    const bool coopmat = flash_attention_coopmat(d, cache, sh.head_dim);
    const bool half_out = f.out_dtype == DType::kF16;
    AKUNU_CHECK(coopmat || !half_out, "flash_attention: an f16 output needs the cooperative-matrix kernel (flash_attention_coopmat)");
    const uint32_t block_rows = coopmat ? AKUNU_FLASH_CM_ROWS : AKUNU_FLASH_ROWS;
    const uint32_t blocks = (f.rows + block_rows - 1) / block_rows;
    AKUNU_CHECK(blocks <= d.max_workgroup_count_x && sh.n_heads <= 65535, "flash_attention: too many rows or heads for one dispatch");
    const Grid grid{blocks, sh.n_heads, ChunkRows::Axis::kX};  // blocks of query rows along x
    if (coopmat) {
        emit(s, "flash_cm_d" + std::to_string(sh.head_dim) + (half_out ? "_f16" : ""), {}, {q, cache.k, cache.v, out, step}, p,
             grid);
        return;
    }
    emit(s, cache_variant("flash_attention", cache), {sh.head_dim / 8}, cache_bindings({q, cache.k, cache.v, out, step}, cache),
         p, grid);
}

bool flash_attention_coopmat(const DeviceProfile& d, const KvBindings& cache, uint32_t head_dim) {
    const char* off = std::getenv("AKUNU_NO_FLASH_COOPMAT");  // A/B against the scalar kernel
    if (off && *off && std::string(off) != "0") return false;
    return d.gemm_coopmat && cache.dtype == KvDType::kF16 && cache.rows == KvRows::kFull && (head_dim == 64 || head_dim == 128);
}

void gated_activation(DispatchSink& s, Activation act, const Binding& gate, const Binding& up, const Binding& out, size_t n,
                      DType out_dtype, uint32_t max_rows) {
    check_dtype(out_dtype, {DType::kF32, DType::kF16}, "act out");
    check_fits(gate, n, DType::kF32, "act", "gate");
    check_fits(up, n, DType::kF32, "act", "up");
    check_fits(out, n, out_dtype, "act", "out");
    const char* kernel = act == Activation::kSilu ? "act_silu" : act == Activation::kGeluTanh ? "act_gelu_tanh" : nullptr;
    AKUNU_CHECK(kernel, "act: this activation has no gated kernel yet");
    ActParams p{checked_u32(n, "act: n")};
    Grid grid = grid_for(s, (n + kElementwiseGroup - 1) / kElementwiseGroup);
    AKUNU_CHECK(!max_rows || (s.chunk_rows() && s.device().profile().indirect_counts),
                "act: a row window needs a chunk's table on a device with indirect counts");
    grid.max_rows = max_rows;
    emit(s, std::string(kernel) + (out_dtype == DType::kF16 ? "_f16" : ""), {}, {gate, up, out}, p, grid);
}

void sample(DispatchSink& s, const Binding& logits, const Binding& token_ids, const Binding& logprobs, const Binding& step,
            const Binding& sampler, size_t n, uint32_t out_slot, size_t rows) {
    check_fits(logits, rows * n, DType::kF32, "sample", "logits");
    check_fits(token_ids, out_slot + rows, DType::kU32, "sample", "token_ids");
    check_fits(logprobs, out_slot + rows, DType::kF32, "sample", "logprobs");
    check_bytes(step, sizeof(StepState), "sample", "step");
    check_bytes(sampler, sizeof(SamplerState), "sample", "sampler");
    const DeviceProfile& d = s.device().profile();
    AKUNU_CHECK(rows <= d.max_workgroup_count_x, "sample: too many rows for one dispatch");
    // A CPU device runs a workgroup's invocations in turn: fewer of them, less barrier cost.
    const uint32_t group = std::min<uint32_t>(d.type == DeviceType::kCpu ? 256 : 1024, d.max_workgroup_invocations);
    SampleParams p{checked_u32(n, "sample: n"), out_slot};
    emit(s, "sample", {group}, {logits, token_ids, logprobs, step, sampler}, p, {uint32_t(rows), 1});
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

void layernorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& b, const Binding& y, const Binding& step,
               size_t rows, size_t dim, float eps) {
    check_fits(x, rows * dim, DType::kF32, "layernorm", "x");
    check_fits(w, dim, DType::kF32, "layernorm", "w");
    check_fits(b, dim, DType::kF32, "layernorm", "b");
    check_fits(y, rows * dim, DType::kF32, "layernorm", "y");
    check_bytes(step, sizeof(StepState), "layernorm", "step");
    AKUNU_CHECK(eps >= 0.0f, "layernorm: eps must be >= 0");
    LayerNormParams p{checked_u32(rows, "layernorm: rows"), checked_u32(dim, "layernorm: dim"), eps};
    emit(s, "layernorm", {reduce_group(s)}, {x, w, b, y, step}, p, grid_for(s, rows));
}

void encoder_attention(DispatchSink& s, const Binding& qkv, const Binding& seq, const Binding& step, const Binding& out,
                       const EncoderAttentionShape& sh) {
    const size_t width = size_t(sh.n_heads) * sh.head_dim;
    AKUNU_CHECK(sh.k_offset >= width && sh.v_offset >= sh.k_offset + width && sh.q_stride >= sh.v_offset + width,
                "encoder_attention: q, k and v must be disjoint column slices of a qkv row");
    check_fits(qkv, (size_t(sh.rows) - 1) * sh.q_stride + sh.v_offset + width, DType::kF32, "encoder_attention", "qkv");
    check_fits(seq, size_t(sh.rows) * 2, DType::kU32, "encoder_attention", "seq");
    check_bytes(step, sizeof(StepState), "encoder_attention", "step");
    AKUNU_CHECK(sh.out_stride >= width, "encoder_attention: out_stride is shorter than n_heads * head_dim");
    check_fits(out, (size_t(sh.rows) - 1) * sh.out_stride + width, DType::kF32, "encoder_attention", "out");
    const EncoderAttentionParams p{checked_u32(sh.n_heads, "encoder_attention: n_heads"), checked_u32(sh.head_dim, "encoder_attention: head_dim"),
                                   checked_u32(sh.rows, "encoder_attention: rows"), sh.q_stride, sh.k_offset, sh.v_offset,
                                   sh.out_stride, sh.scale};
    emit(s, "encoder_attention", {}, {qkv, seq, step, out}, p, grid_for(s, size_t(sh.rows) * sh.n_heads));
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
