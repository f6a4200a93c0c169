// Argument checks, variant choice and workgroup geometry of the GEMV launchers in kernels.h:
// gemv_core.glsl's kernels (gemv.comp for every type, gemv_gate_up.comp and gemv_parts.comp for float rows), gemv_tiles.comp (tile-major 32-element blocks),
// gemv_dot.comp (integer dot products), and the policy predicates that say
// what each of them takes on a device.
#include "akunu/engine/kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "akunu/core/error.h"
#include "akunu/engine/kernel_launch.h"
#include "akunu/formats/tiles.h"
#include "params.h"

namespace akunu::kernels {

namespace launch {

// The 32-element block formats that the word, integer-dot and gemv.comp W_LANE_X paths read.
bool block32(TensorType wtype) {
    return wtype == TensorType::Q8_0 || wtype == TensorType::Q4_0 || wtype == TensorType::Q4_1;
}
// Their tile-major forms (formats/tiles.h), which Vulkan devices read with gemv_tiles.comp.
bool tiles32(TensorType wtype) {
    const cpu::TileLayout* l = cpu::tile_layout(wtype);
    return l && block32(l->base);
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

}  // namespace launch

using namespace launch;

namespace {

// gemv_dot.comp's geometry: workgroup size, rows per subgroup, 16-byte chunks per invocation
// and row in flight (sg_rows * chunks uvec4 registers), and elements of x per table.
struct GemvDotShape {
    uint32_t group = 512, sg_rows = 1, chunks = 4, slice = 8192;
};

// Chosen over the 1b and llama2-7b decode shapes (bench/NOTES.md, "Quantized GEMV with integer
// dot products"): 512 invocations, one row per subgroup, tables of 8192 elements of x (k = 11008
// in two slices); the LM heads' 32000 rows of Q8_0 and Q4_1 run faster with 4 rows per
// subgroup, which share each table entry they read.
GemvDotShape gemv_dot_shape(const DeviceProfile& d, TensorType wtype, size_t rows, size_t k) {
    GemvDotShape g;
    if (rows >= 16384 && wtype != TensorType::Q4_0) g.sg_rows = 4, g.chunks = 2;
    g.group = std::min(g.group, d.max_workgroup_invocations);
    // The table holds an entry of 16 bytes per 4 bytes of a row's slice (and 4 spare entries),
    // plus 512 bytes of partial sums; each invocation rounds at most 16 vec4s of x per slice.
    const size_t block_bytes = type_traits(wtype).block_bytes;
    const size_t entry = 16;
    const size_t fits = (size_t(d.shared_memory_bytes) - 512 - 4 * entry) / entry * 128 / block_bytes / 256 * 256;
    g.slice = uint32_t(std::min<size_t>({g.slice, k, fits, size_t(g.group) * 64 / 256 * 256}));
    return g;
}

}  // namespace

namespace {

// gemv_tiles.comp's geometry: invocations per row of a tile (the workgroup is 32 times that),
// blocks each invocation loads before multiplying, and blocks of x staged per pass. Over the 1b
// and 7b decode shapes of Q8_0 and Q4_0, 16 x 2 beat 16 x 8, 8 x 8 and 32 x 4 for GEMVs of many
// tiles (bench/NOTES.md, "Tile-major Q8_0/Q4_0/Q4_1 on the GPU, and one dispatch for Q/K/V and
// for gate/up"); GEMVs of at most one tile per compute unit (7b's O and down, 1b's Q/K/V, O and
// down) run best as 32 x 2 with x rounded ("Tile GEMV: 16-byte code loads, and 1,024 invocations
// with whole rows of x for GEMVs of few tiles"), and with fp32 x as 16 x 4 for 4-bit blocks ("x
// rounded to int16 by default in the tile GEMV"). lavapipe runs a workgroup's invocations as
// loops between barriers, so a wide workgroup costs it far more than a narrow one, and 32
// invocations (one a row, one block a round) are its fastest ("A short prompt runs its own
// rows' workgroups").
// gemm_rows.comp stages xrows rows of x the same way (1 for the GEMV). `tuned`: the tuning
// string that overrides the shape, "split:units[:slice[:xrows]]" (experiments, kernel tests).
struct GemvTilesShape {
    uint32_t split = 16, units = 2, slice = 128, xrows = 1;
};
GemvTilesShape gemv_tiles_shape(const DeviceProfile& d, TensorType wtype, size_t k, size_t tiles, bool int_x,
                                uint32_t xrows, const std::string& tuned) {
    GemvTilesShape g;
    g.xrows = xrows;
    if (d.type == DeviceType::kCpu) g.split = 1, g.units = 1;
    // One workgroup per compute unit at most. Only a GEMV's (one row of x) shape follows it: rows
    // of x multiply each block's load, which the few-tile shapes' wide staging does not fit.
    const bool few = xrows == 1 && tiles <= d.compute_units;
    if (few && int_x) {
        // 1,024 invocations and x for the whole row staged at once (up to ~600 blocks fit in
        // 48 KiB): twice the warps on each compute unit, and one staging pass with one barrier
        // where a 7b down projection had three.
        g.split = 32, g.slice = 1024;
    } else if (int_x && xrows == 2 && d.type != DeviceType::kCpu && d.compute_units > 0) {
        // Two rows of x: four blocks in flight per invocation, faster than two at 7b's and 1b's
        // rows (bench/NOTES.md, "The few-row tile GEMV's rows fixed by specialization").
        g.units = 4;
    } else if (int_x && d.compute_units > 0 && k < 4096) {
        // Short rows (1b's 2,048): 8 invocations a row, so that each still takes 8 blocks.
        g.split = 8;
    } else if (int_x && xrows >= 3 && d.type != DeviceType::kCpu && d.compute_units > 0) {
        // 3 or more rows of x (4 in the short tables of batched steps and short prompts): 1,024
        // invocations of one unit each and x staged in the widest slice that fits, faster than
        // 16 x 2 at 3 and 4 rows though not at 2 (bench/NOTES.md, "The tile GEMV of 3 and 4 rows
        // of x on 1,024 invocations").
        g.split = 32, g.units = 1, g.slice = 1024;
    } else if (few && type_traits(cpu::tile_layout(wtype)->base).block_bytes < 32) {
        // 4-bit blocks (18 or 20 bytes); Q8_0's 34 already keep twice the bytes in flight per unit.
        g.units = 4;
    }
    if (!tuned.empty()) std::sscanf(tuned.c_str(), "%u:%u:%u:%u", &g.split, &g.units, &g.slice, &g.xrows);
    g.split = std::clamp(g.split, 1u, std::min(32u, d.max_workgroup_invocations / 32));  // gemv_tiles.comp MAX_SPLIT
    g.units = std::clamp(g.units, 1u, 8u);  // MAX_UNITS
    g.xrows = std::clamp(g.xrows, 1u, 16u);  // gemm_rows.comp MAX_XROWS
    // Shared memory per block of a staged row: 128 bytes of float x or 64 of rounded x, and 8 of
    // sums; then 4 KiB of partial sums and 512 bytes of sums of squares.
    const uint32_t fits = (d.shared_memory_bytes - 4096 - 512) / (g.xrows * (int_x ? 72 : 136));
    g.slice = std::clamp<uint32_t>(std::min<uint32_t>(g.slice, uint32_t(k / 32)), 1u, fits);
    return g;
}
// Float weights (and the CPU backend's tiles of them), which gemv.comp reads as vec4s.
bool float_weights(TensorType wtype) {
    const cpu::TileLayout* l = cpu::tile_layout(wtype);
    return type_traits(l ? l->base : wtype).block_size == 1;
}

// The suffix of a GEMV's kernel whose folded rope_kv writes through block tables: the cache's
// layout name, as the cache kernels' variants are named ("_blocks": KV_BLOCKS in rope_fold.glsl;
// "_batch": KV_BLOCKS, KV_BATCH). Full rows and rings need none (rope_fold.glsl wraps a ring's
// position itself).
std::string rope_variant(const GemvRopeKv* rope) {
    if (!rope || !rope->cache.in_blocks()) return "";
    return std::string("_") + kv_rows_name(rope->cache.rows);
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
// bytes) of a 32-element block. Over the 1b and 7b decode shapes: float rows 256 x 4 rows x 2
// vec4s (ahead of 128 x 4 x 1; 64, 2 or 8 rows and 4 vec4s were not faster: bench/NOTES.md,
// "The float GEMV: RoPE and the KV write folded, 256 x 4 rows x 2 vectors"), Q8_0 two units and
// the 4-bit formats one ("gemv.comp with the norms folded and several units in flight"). CPU-type
// devices take one subgroup a workgroup (below), where wider workgroups cost more than they do
// on a GPU.
struct GemvCompShape {
    uint32_t group = 128, rows = 4, units = 1, wide = 0;
};
GemvCompShape gemv_comp_shape(const DeviceProfile& d, TensorType wtype) {
    GemvCompShape g;
    // Float rows on GPUs: 256 invocations, 2 vec4s of each of 4 rows in flight; 16-bit floats
    // read 8 weights per 16-byte load (gemv.comp WIDE) with 128 invocations, 1 load per row,
    // which decodes faster than 256 x 2 of 8-byte loads (bench/NOTES.md, "Float GEMV rows in
    // 16-byte loads of 8 weights").
    if (float_weights(wtype) && d.type != DeviceType::kCpu) g.group = 256, g.units = 2;
    if ((wtype == TensorType::F16 || wtype == TensorType::BF16) && d.type != DeviceType::kCpu)
        g.group = 128, g.units = 1, g.wide = 1;
    if (wtype == TensorType::Q8_0) g.units = 2;
    // CPU-type devices (lavapipe) run a workgroup's invocations as loops between barriers: one
    // subgroup a workgroup, 8 float rows (16-bit ones 8 weights a load) or 4 of blocks, which
    // makes their decode steps much shorter (bench/NOTES.md, "A short prompt runs its own rows'
    // workgroups").
    if (d.type == DeviceType::kCpu) {
        g.group = std::max(d.subgroup_size, 1u);
        g.rows = float_weights(wtype) ? 8 : 4;
        g.wide = wtype == TensorType::F16 || wtype == TensorType::BF16;
    }
    if (!d.tuning.gemv_rows.empty())  // experiments: "invocations:rows[:units[:wide]]"
        std::sscanf(d.tuning.gemv_rows.c_str(), "%u:%u:%u:%u", &g.group, &g.rows, &g.units, &g.wide);
    g.group = std::clamp(g.group, 1u, d.max_workgroup_invocations);
    g.rows = std::clamp(g.rows, 1u, 8u);  // gemv.comp MAX_ROWS
    g.units = std::clamp(g.units, 1u, 4u);  // gemv.comp MAX_UNITS
    return g;
}

// The kernels of include/gemv_core.glsl, which share one geometry (gemv_comp_shape) and spec
// constants: gemv_<wtype> (one matrix; float rows may hand a norm forward and wait for a
// hand-off), gemv_gate_up_<wtype> and gemv_parts_<wtype> (float weights). Each entry file lists
// the bindings it takes.
enum class GemvCompKind { kPlain, kGateUp, kParts };

void emit_gemv_core(DispatchSink& s, GemvCompKind kind, TensorType wtype, std::vector<Binding> bindings, GemvParams p,
                    uint32_t gated = AKUNU_GEMV_X, const GemvHandoff* handoff = nullptr,
                    const std::string& variant = "") {
    static constexpr const char* kNames[] = {"gemv", "gemv_gate_up", "gemv_parts"};
    const GemvCompShape g = gemv_comp_shape(s.device().profile(), wtype);
    // Gate and up rows in halves of one workgroup; a RoPE pair's rows in one workgroup.
    const bool pairs = kind == GemvCompKind::kGateUp;
    const uint32_t group_rows = kind == GemvCompKind::kPlain ? g.rows : g.rows + g.rows % 2;
    uint32_t handoff_bits = 0;
    if (handoff) {
        p.handoff_wait = handoff->wait, p.handoff_wait_count = handoff->wait_count;
        p.handoff_clear = handoff->clear, p.handoff_clear_count = handoff->clear_count;
        handoff_bits = (handoff->wait ? 2u : 0u) | (handoff->clear_count ? 4u : 0u);
    }
    const auto groups_of = [&](size_t rows) { return (rows + group_rows - 1) / group_rows; };
    const size_t groups = pairs ? (size_t(p.rows) + group_rows / 2 - 1) / (group_rows / 2)
                                : groups_of(p.rows) + groups_of(p.rows1) + groups_of(p.rows2);
    emit(s, weight_variant(kNames[int(kind)], wtype) + variant,
         {g.group, group_rows, p.x_op, g.units, g.wide ? 1u : 0u, gated, handoff_bits}, std::move(bindings), p,
         grid_for(s, groups), handoff && handoff->wait);
}

// gemv_<wtype>: bindings 0 W, 1 x, 2 y, 3 `second` (the norm weight or up of x_op); float types
// also 4 to 6 a norm handed forward (y stands in without one) and 7 the hand-off counters.
void emit_gemv_plain(DispatchSink& s, const Binding& w, const Binding& y, TensorType wtype, const Binding& x,
                     const Binding& second, const GemvParams& p, const GemvNormOut* norm_out,
                     const GemvHandoff* handoff) {
    std::vector<Binding> bindings{w, x, y, second};
    if (float_weights(wtype)) {
        if (norm_out)
            bindings.insert(bindings.end(), {norm_out->weight, norm_out->normed, norm_out->sums});
        else
            bindings.insert(bindings.end(), {x, y, y});
        bindings.push_back(handoff ? handoff->counters : y);
    }
    emit_gemv_core(s, GemvCompKind::kPlain, wtype, std::move(bindings), p, AKUNU_GEMV_X, handoff);
}

}  // namespace

namespace launch {

// gemm_rows.comp's dispatch: XROWS rows of x a workgroup (16, or the rows the GEMM sees), row
// groups along x and tiles along y, so that one tile's workgroups run side by side; the tile
// GEMV's geometry for that many workgroups, its slice cut to what XROWS rows' staging fits.
// tuning gemm_rows "split:units[:slice[:xrows]]" for experiments.
void emit_gemm_rows(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y,
                    const GemmShape& g, const GemmParams& p, const Binding& step) {
    const DeviceProfile& d = s.device().profile();
    // X as halves (the GEMMs of cooperative-matrix devices take their activations so) is rounded
    // as the GEMVs round x, finer than the halves already are; f32 X keeps the GEMMs' float
    // products, so that a prompt of a few tokens scores as a longer chunk does.
    const XRounding rounding =
        g.x_dtype == DType::kF16 ? gemv_x_rounding(d, wtype, g.k, engine_x_rounding(d)) : XRounding::kFloat;
    const bool int_x = rounding != XRounding::kFloat;
    const size_t rows_seen = g.max_rows ? std::min<size_t>(g.m, g.max_rows - 1) : g.m;
    const uint32_t rows = uint32_t(std::min<size_t>(16, rows_seen));
    const size_t tiles = (g.n + 31) / 32;
    const GemvTilesShape shape =
        gemv_tiles_shape(d, wtype, g.k, tiles * ((g.m + rows - 1) / rows), int_x, rows, d.tuning.gemm_rows);
    AKUNU_CHECK(g.ldx % 4 == 0, "gemm: the tile GEMV of several rows needs ldx a multiple of 4");
    const uint32_t xrows = shape.xrows;
    const size_t gx = (g.m + xrows - 1) / xrows;
    AKUNU_CHECK(gx <= d.max_workgroup_count_x && tiles <= 65535, "gemm: the matrix is too large for one dispatch");
    emit(s, weight_variant(int_x ? "gemm_rows_dot" : "gemm_rows", wtype),
         {32 * shape.split, shape.units, shape.slice, rounding == XRounding::kInt16 ? 16u : 8u, xrows,
          g.x_dtype == DType::kF16 ? 1u : 0u},
         {w, x, y, step}, p, {uint32_t(gx), uint32_t(tiles), ChunkRows::Axis::kX, g.min_rows, g.max_rows});
}

}  // namespace launch

namespace {

// One gemv_tiles.comp dispatch: a workgroup per tile of each of p's matrices (one to three).
// Bindings: W0, x, y0, the op's second input (or x again), W1, W2, y1, y2, then the RoPE
// tables, the K and V caches and the step of a folded rope_kv, then a hand-off's counters
// (y0 stands in where there is none: a binding the kernel writes anyway, so no false hazard).
void emit_gemv_tiles(DispatchSink& s, const std::array<Binding, 3>& w, const std::array<Binding, 3>& y,
                     TensorType wtype, const Binding& x, const Binding& second, GemvParams p, XRounding rounding,
                     const GemvRopeKv* rope = nullptr, const GemvHandoff* handoff = nullptr) {
    const uint32_t tiles = gemv_tiles_groups({p.rows, p.rows1, p.rows2});
    const bool int_dot = rounding != XRounding::kFloat;
    const GemvTilesShape g =
        gemv_tiles_shape(s.device().profile(), wtype, p.k, tiles, int_dot, 1, s.device().profile().tuning.gemv_tiles);
    std::vector<Binding> bindings{w[0], x, y[0], second, w[1], w[2], y[1], y[2]};
    append_rope_bindings(bindings, rope, x, y[0]);
    uint32_t handoff_bits = 0;
    if (handoff) {
        // The waiting side counts workgroups; one row of them keeps that count exact.
        AKUNU_CHECK(
            tiles <= s.device().profile().max_workgroup_count_x,
            "gemv: a hand-off needs the GEMV's " + std::to_string(tiles) + " workgroups in one row of the grid");
        p.handoff_signal = handoff->signal, p.handoff_wait = handoff->wait, p.handoff_wait_count = handoff->wait_count;
        p.handoff_clear = handoff->clear, p.handoff_clear_count = handoff->clear_count;
        handoff_bits = (handoff->signal ? 1u : 0u) | (handoff->wait ? 2u : 0u) | (handoff->clear_count ? 4u : 0u);
    }
    bindings.push_back(handoff ? handoff->counters : y[0]);
    emit(s, weight_variant(int_dot ? "gemv_dot" : "gemv", wtype) + rope_variant(rope),
         {32 * g.split, g.units, p.x_op, g.slice, rounding == XRounding::kInt16 ? 16u : 8u, handoff_bits},
         std::move(bindings), p, grid_for(s, tiles), handoff && handoff->wait);
}
bool word_rows(TensorType wtype, size_t k) { return block32(wtype) && k % 256 == 0; }

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
    GemvParams p{checked_u32(rows[0], what.c_str()),
                 checked_u32(k, (std::string(kernel) + ": k").c_str()),
                 accumulate ? 1u : 0u,
                 op,
                 input ? input->eps : 0.0f,
                 input ? input->weight_offset : 0.0f,
                 uint32_t(rows[1]),
                 uint32_t(rows[2])};
    p.norm_partials = input ? input->partials : 0u;
    return p;
}
// A norm handed forward rides only on gemv.comp's float path (its workgroups' rows are the
// residual rows they sum, by a subgroup add over the rows' invocations); the tile and
// integer-dot GEMVs do not take it.
bool takes_norm_ready(const DeviceProfile& d, TensorType wtype) {
    return !d.cpu_backend && float_weights(wtype) && d.subgroup_size >= gemv_comp_shape(d, wtype).rows;
}
}  // namespace

// Tiles take any k of whole blocks; the same rows as the row-major kernel round x, so that where
// x is rounded does not depend on the layout.
bool gemv_int_dot(const DeviceProfile& d, TensorType wtype, size_t k) {
    return d.gemv_int_dot && (word_rows(wtype, k) || (tiles32(wtype) && k % 256 == 0));
}

uint32_t gemm_tile_rows(const DeviceProfile& d, TensorType wtype) {
    return !d.cpu_backend && tiles32(wtype) ? d.gemm_tile_rows : 0;
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

bool gemv_folds_norm(const DeviceProfile& d, TensorType wtype, size_t k) {
    return type_traits(wtype).block_size == 1 || block32(wtype) || gemv_folds_activation(d, wtype, k);
}

bool gemv_folds_activation(const DeviceProfile& d, TensorType wtype, size_t k) {
    return d.cpu_backend || tiles32(wtype) || (d.int8_activations && gemv_int_dot(d, wtype, k));
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

void gemv(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y, size_t rows,
          size_t k, bool accumulate, const GemvInput* input, XRounding rounding, const GemvHandoff* handoff,
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
        AKUNU_CHECK(
            accumulate && p.x_op != AKUNU_GEMV_RMSNORM && p.x_op != AKUNU_GEMV_RMSNORM_READY,
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
        AKUNU_CHECK(!handoff->signal && k % 4 == 0,
                    "gemv: float weights only wait for a hand-off, over rows of a multiple of 4");
    if (tiles32(wtype) && !d.cpu_backend) {
        emit_gemv_tiles(s, {w, w, w}, {y, y, y}, wtype, x, bindings[3], p, taken, nullptr, handoff);
        return;
    }
    const bool int_dot = taken == XRounding::kInt8;
    if (int_dot) {
        const GemvDotShape g = gemv_dot_shape(d, wtype, rows, k);
        const uint32_t group_rows = std::max(1u, g.group / std::max(1u, d.subgroup_size)) * g.sg_rows;
        emit(s, weight_variant("gemv_dot", wtype), {g.group, group_rows, g.sg_rows | (g.chunks << 8), g.slice},
             bindings, p, grid_for(s, (rows + group_rows - 1) / group_rows));
        return;
    }
    emit_gemv_plain(s, w, y, wtype, x, bindings[3], p, norm_out, handoff);
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
    emit_gemv_core(s, GemvCompKind::kGateUp, wtype, {w_gate, x, y, second, w_up}, p, op);
}

bool gemv_folds_rope_kv(const DeviceProfile& d, TensorType wtype, const KvBindings& cache, bool half_split) {
    (void)cache;  // every cache: an f16 one's rows written by the GEMV, a quantized one's by kv_write after it
    return !d.cpu_backend && ((tiles32(wtype) && !half_split) || float_weights(wtype));
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
                    "gemv_parts: rope_kv folds only into tile-major (adjacent pairs) or float Q/K/V GEMVs");
        const uint32_t hd = rope->head_dim;
        AKUNU_CHECK(
            hd > 0 && hd % 2 == 0 && rows[0] % hd == 0 && rows[1] % hd == 0 && rows[1] == rows[2] && rows[1] > 0,
            "gemv_parts: a folded rope_kv needs Q, K and V of whole heads of an even head_dim, K and V alike");
        const size_t n_kv = rows[1] / hd;
        const bool batch = c.rows == KvRows::kBatch;
        const uint32_t cache_rows = c.in_blocks() ? rope->positions : c.cache_rows;  // blocks: the context
        AKUNU_CHECK(cache_rows > 0, "gemv_parts: the cache has no rows");
        check_cache(c, uint32_t(n_kv), cache_rows, hd, "gemv_parts");
        check_fits(rope->cos, size_t(rope->positions) * (hd / 2), DType::kF32, "gemv_parts", "cos");
        check_fits(rope->sin, size_t(rope->positions) * (hd / 2), DType::kF32, "gemv_parts", "sin");
        check_bytes(rope->step, sizeof(StepState) + (batch ? sizeof(BatchRow) : 0), "gemv_parts", "step");
        p.rope_head_dim = hd;
        p.rope_cache_rows = c.dtype == KvDType::kF16 ? cache_rows : 0;  // 0: RoPE only (rope_fold.glsl)
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
    else {
        std::vector<Binding> bindings{w[0], x, y[0], second, w1, w2, y1, y2};
        append_rope_bindings(bindings, rope, x, y[0]);
        emit_gemv_core(s, GemvCompKind::kParts, wtype, std::move(bindings), p, AKUNU_GEMV_X, nullptr,
                       rope_variant(rope));
    }
}

}  // namespace akunu::kernels
