// The prefill GEMMs' launchers (kernels.h): the tiled and cooperative-matrix GEMMs, and the
// gated GEMM of gate, up and the activation on workgroup-scope cooperative matrices.
#include <cstdio>
#include <cstdlib>

#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernels.h"
#include "gemm_tiles.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

// gemm_cm2.comp's tile and launch order: features x tokens, the k step, steps an iteration,
// invocations, tokens fastest. 128 features x 128 tokens, 64 of k a step, 4 steps an iteration;
// 64 features x 128 tokens, 2 steps, for outputs of up to 2,048 (more workgroups): the tiles that
// measured fastest (bench/NOTES.md, "The prefill GEMM on workgroup-scope cooperative matrices").
// Token tiles go fastest in the launch order, so that W crosses into L2 once per tile ("The cm2
// GEMM's tiles launched tokens first"). The gated GEMM holds two accumulators of that tile over
// 512 invocations.
static std::vector<uint32_t> cm2_spec(size_t n, bool gated, bool narrow = false) {
    narrow = narrow || n <= 2048;
    const uint32_t features = narrow ? 64 : 128, tokens = 128, step_k = 64, unroll = narrow ? 2 : 4;
    const uint32_t invocations = gated ? 512 : 256, tokens_fastest = 1;
    return {features, tokens, step_k, unroll, invocations, tokens_fastest, 0};
}

// The chunk rows up to which gemm_cm2 takes the narrow tile for an output of n features: those
// whose wide tiles would occupy at most half the compute units (a 4,096-wide projection has 32
// wide tiles per 128 tokens, so on about 130 compute units chunks of up to 256 tokens). There the
// narrow tile's twice the workgroups fill idle units, where at more rows the wide tile's reuse
// measured faster (bench/NOTES.md, "The cm2 tile, measured in the chunk"). 0: none (outputs
// that take the narrow tile anyway, a device that does not say its compute units, tuning
// gemm_cm2_narrow=0).
static uint32_t cm2_narrow_rows(const DeviceProfile& d, size_t n) {
    const std::vector<uint32_t> wide = cm2_spec(n, false);
    if (wide[0] == cm2_spec(n, false, true)[0] || d.compute_units == 0 || !d.tuning.gemm_cm2_narrow) return 0;
    const size_t feature_tiles = (n + wide[0] - 1) / wide[0];
    return uint32_t(d.compute_units / 2 / feature_tiles * wide[1]);
}

// Whether a GEMM sees no more rows than the device's short tiles take: its m, or what its row
// window admits.
static bool gemm_short_tiles(const DeviceProfile& d, const GemmShape& g) {
    const size_t rows_seen = g.max_rows ? std::min<size_t>(g.m, g.max_rows - 1) : g.m;
    return d.gemm_short_rows && rows_seen <= d.gemm_short_rows;
}

// Whether gemm() takes gemm_cm2.comp: f16 W, X as halves, past the short tiles, on a device
// with cooperative matrix 2.
static bool gemm_runs_cm2(const DeviceProfile& d, TensorType wtype, const GemmShape& g) {
    return d.gemm_coopmat && d.gemm_coopmat2 && g.x_dtype == DType::kF16 && wtype == TensorType::F16 &&
           !gemm_short_tiles(d, g);
}

// One GEMM dispatch: tiles of bm rows x bn features over Y[m, n], for chunks of
// [p.min_rows, p.max_rows) rows.
static void emit_tiles(DispatchSink& s, const std::string& kernel, const std::vector<uint32_t>& spec,
                       std::vector<Binding> bindings, const GemmParams& p, size_t bm, size_t bn, const char* what) {
    const size_t gx = (p.n + bn - 1) / bn, gy = (p.m + bm - 1) / bm;
    AKUNU_CHECK(gx <= s.device().profile().max_workgroup_count_x && gy <= 65535,
                std::string(what) + ": the matrix is too large for one dispatch");
    emit(s, kernel, spec, std::move(bindings), p,
         {uint32_t(gx), uint32_t(gy), ChunkRows::Axis::kY, p.min_rows, p.max_rows});
}

// gemm_cm2_f16 of tile `spec` (cm2_spec: features, tokens, ...) for chunks of [min_rows, max_rows).
static void emit_cm2(DispatchSink& s, const std::vector<Binding>& bindings, GemmParams p,
                     const std::vector<uint32_t>& spec, uint32_t min_rows, uint32_t max_rows) {
    p.min_rows = min_rows, p.max_rows = max_rows;
    emit_tiles(s, "gemm_cm2_f16", spec, bindings, p, spec[1], spec[0], "gemm");
}

void gemm(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y, const GemmShape& g,
          const Binding& step, bool accumulate, bool allow_coopmat) {
    const TensorTypeTraits& t = type_traits(wtype);
    check_row_blocks(t, g.k, "gemm", "k");
    AKUNU_CHECK(g.ldx >= g.k && g.ldy >= g.n, "gemm: row strides must cover k (X) and n (Y)");
    check_bytes(w, tensor_bytes(t, uint64_t(g.n) * g.k, "gemm W"), "gemm", "W");
    const bool x_half = g.x_dtype == DType::kF16;
    check_dtype(g.x_dtype, {DType::kF32, DType::kF16}, "gemm X");
    check_fits(x, (g.m - 1) * g.ldx + g.k, g.x_dtype, "gemm", "X");
    check_fits(y, (g.m - 1) * g.ldy + g.n, DType::kF32, "gemm", "Y");
    check_bytes(step, sizeof(StepState), "gemm", "step");
    GemmParams p{checked_u32(g.m, "gemm: m"),
                 checked_u32(g.n, "gemm: n"),
                 checked_u32(g.k, "gemm: k"),
                 checked_u32(g.ldx, "gemm: ldx"),
                 checked_u32(g.ldy, "gemm: ldy"),
                 accumulate ? 1u : 0u,
                 g.min_rows,
                 g.max_rows};
    const bool coopmat = allow_coopmat && s.device().profile().gemm_coopmat;
    AKUNU_CHECK(!x_half || (coopmat && gemm_takes_half_x(s.device().profile(), g.k, g.ldx)),
                "gemm: an f16 X needs the cooperative-matrix GEMM and k and ldx multiples of 8 (gemm_takes_half_x)");
    const size_t rows_seen = g.max_rows ? std::min<size_t>(g.m, g.max_rows - 1) : g.m;
    if (rows_seen <= gemm_tile_rows(s.device().profile(), wtype)) return emit_gemm_rows(s, w, wtype, x, y, g, p, step);
    const bool short_tiles = gemm_short_tiles(s.device().profile(), g);
    std::vector<Binding> bindings{w, x, y, step};
    // [cooperative matrices][wide, short, short past the narrow rows]: the kernel and its tile
    // (gemm_tiles.h); the scalar GEMM's short tiles have one form.
    static const struct {
        const char* kernel;
        size_t bm, bn;
    } kTiles[2][3] = {
        {{"gemm", AKUNU_GEMM_BM, AKUNU_GEMM_BN},
         {"gemm_short", AKUNU_GEMM_SHORT_BM, AKUNU_GEMM_SHORT_BN},
         {"gemm_short", AKUNU_GEMM_SHORT_BM, AKUNU_GEMM_SHORT_BN}},
        {{"gemm_cm", AKUNU_GEMM_CM_BM, AKUNU_GEMM_CM_BN},
         {"gemm_cm_short", AKUNU_GEMM_CM_SHORT_BM, AKUNU_GEMM_CM_SHORT_BN},
         {"gemm_cm_short_wide", AKUNU_GEMM_CM_SHORT_WIDE_BM, AKUNU_GEMM_CM_SHORT_WIDE_BN}},
    };
    const int form = !short_tiles ? 0 : rows_seen <= AKUNU_GEMM_CM_SHORT_NARROW_ROWS ? 1 : 2;
    const auto& tiles = kTiles[coopmat][form];
    const size_t bm = tiles.bm, bn = tiles.bn;
    std::string kernel = weight_variant(tiles.kernel, wtype);
    std::vector<uint32_t> spec;
    // f16 W and X past the short tiles: workgroup-scope cooperative matrices where the device
    // and the build have them (gemm_cm2.comp; its tile: cm2_spec, narrow for the chunks
    // cm2_narrow_rows names, in a row window of its own).
    const bool cm2 = allow_coopmat && gemm_runs_cm2(s.device().profile(), wtype, g);
    if (cm2) {
        bindings.push_back(w);  // the gated variant's up matrix, not read
        const uint32_t narrow_rows = cm2_narrow_rows(s.device().profile(), g.n);
        const uint32_t split = narrow_rows + 1;  // the first row count of the wide tile's window
        const bool lower = narrow_rows > 0 && g.min_rows < split,
                   upper = g.m >= split && (!g.max_rows || g.max_rows > split);
        if (lower) emit_cm2(s, bindings, p, cm2_spec(g.n, false, true), g.min_rows, upper ? split : g.max_rows);
        if (upper || !lower) emit_cm2(s, bindings, p, cm2_spec(g.n, false), lower ? split : g.min_rows, g.max_rows);
        return;
    }
    if (x_half) spec = {1u};  // gemm_cm.comp's X_HALF
    emit_tiles(s, kernel, spec, std::move(bindings), p, bm, bn, "gemm");
}

bool gemm_fuses_gated(const DeviceProfile& d, TensorType wtype, Activation act, const GemmShape& g) {
    // The row window of a shorter chunk's act_* comes from the indirect counts alone (act.comp
    // has no step to check), so only devices that use them.
    return gemm_runs_cm2(d, wtype, g) && d.indirect_counts && gemm_takes_half_x(d, g.k, g.ldx) &&
           (act == Activation::kSilu || act == Activation::kGeluTanh) && d.tuning.gemm_gated;
}

void gemm_gated(DispatchSink& s, Activation act, const Binding& w_gate, const Binding& w_up, const Binding& x,
                const Binding& out, const GemmShape& g, const Binding& step) {
    AKUNU_CHECK(
        gemm_fuses_gated(s.device().profile(), TensorType::F16, act, g),
        "gemm_gated: needs f16 weights, X as halves past the short tiles and a device with cooperative matrix 2 "
        "and indirect counts (gemm_fuses_gated)");
    AKUNU_CHECK(g.ldx >= g.k && g.ldy >= g.n, "gemm_gated: row strides must cover k (X) and n (out)");
    check_bytes(w_gate, g.n * g.k * 2, "gemm_gated", "gate");
    check_bytes(w_up, g.n * g.k * 2, "gemm_gated", "up");
    check_fits(x, (g.m - 1) * g.ldx + g.k, DType::kF16, "gemm_gated", "X");
    check_fits(out, (g.m - 1) * g.ldy + g.n, DType::kF16, "gemm_gated", "out");
    check_bytes(step, sizeof(StepState), "gemm_gated", "step");
    GemmParams p{checked_u32(g.m, "gemm_gated: m"),
                 checked_u32(g.n, "gemm_gated: n"),
                 checked_u32(g.k, "gemm_gated: k"),
                 checked_u32(g.ldx, "gemm_gated: ldx"),
                 checked_u32(g.ldy, "gemm_gated: ldy"),
                 0u,
                 g.min_rows,
                 g.max_rows};
    std::vector<uint32_t> spec = cm2_spec(g.n, true);
    spec[6] = act == Activation::kSilu ? 1 : 2;  // gemm_cm2.comp's GATED
    emit_tiles(s, "gemm_cm2_f16", spec, {w_gate, x, out, step, w_up}, p, spec[1], spec[0], "gemm_gated");
}

bool gemm_takes_half_x(const DeviceProfile& d, size_t k, size_t ldx) {
    return d.gemm_coopmat && k % 8 == 0 && ldx % 8 == 0;
}

}  // namespace akunu::kernels
