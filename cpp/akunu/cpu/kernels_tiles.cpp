// CPU GEMV and GEMM on tile-major weights (tiles.h), the layout the CPU backend loads every
// projection matrix in. Same semantics, parameters and bindings as gemv.comp and gemm.comp
// (the kernels are registered as "gemv_q4_0_t32" and borrow "gemv_q4_0"'s interface).
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/gemm_bf16.h"
#include "akunu/cpu/gemm_vnni.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/cpu/tile_unpack.h"
#include "akunu/formats/tiles.h"
#include "akunu/core/half.h"
#include "params.h"

namespace akunu::cpu {

namespace {

const TileLayout& layout_of(const CpuArgs& a) { return *tile_layout(TensorType(a.variant)); }

// Per-thread buffers for one row of x in an integer form.
struct RowX {
    std::vector<int8_t> q;
    std::vector<int16_t> q16;
    std::vector<float> d, fsum;
    std::vector<int32_t> sum;
};

// Row f[0:k] as `type`'s tile product in `form` reads it: rounded to 16 or 8 bits per block of
// 32 (the GEMV's rounding), with its block sums where the product takes them; sized once.
TileX row_x(TensorType type, XForm form, const float* f, size_t k, RowX& b) {
    TileX x;
    x.f = f;
    if (form != XForm::kFloat && b.d.size() < k / 32) b.d.resize(k / 32), b.sum.resize(k / 32);
    if (form == XForm::kInt8) {
        if (b.q.size() < k) b.q.resize(k);
        quantize_x(f, k, b.q.data(), b.d.data(), b.sum.data());
        x.q = b.q.data(), x.d = b.d.data(), x.sum = b.sum.data();
    } else if (form == XForm::kInt16) {
        if (b.q16.size() < k) b.q16.resize(k);
        quantize_x16(f, k, b.q16.data(), b.d.data(), b.sum.data(), tile_sum_block(type) == 32);
        x.q16 = b.q16.data(), x.d = b.d.data(), x.sum = b.sum.data();
    }
    if (tile_wants_block_sums(type, form)) {
        if (b.fsum.size() < k / 16) b.fsum.resize(k / 16);
        block_sums(f, k, tile_sum_block(type), b.fsum.data());
        x.fsum = b.fsum.data();
    }
    return x;
}

// The launcher's workgroups hold spec[1] rows each; a tile belongs to the workgroup range that
// holds its first row, so each tile is read once, by one thread, and whole. x is prepared per
// range (norm, block sums, 16- or 8-bit blocks) in per-thread buffers sized once.
void gemv_tiles(const CpuArgs& a, size_t begin, size_t end, XForm form) {
    const auto& p = a.p<GemvParams>();
    const size_t rows_per_group = a.spec[1] ? a.spec[1] : 4;
    const size_t t0 = (begin * rows_per_group + kTileRows - 1) / kTileRows;
    const size_t t1 =
        std::min((end * rows_per_group + kTileRows - 1) / kTileRows, (p.rows + kTileRows - 1) / kTileRows);
    if (t0 >= t1) return;
    const TensorType type = TensorType(a.variant);
    const size_t bytes = tile_bytes(layout_of(a), p.k);
    float inv_rms;
    thread_local RowX buffers;
    const TileX x = row_x(type, form, gemv_input(a, &inv_rms), p.k, buffers);
    const TileGemvFn dot = tile_gemv(type, form);
    float* y = a.at<float>(2);
    alignas(32) float out[kTileRows];
    for (size_t t = t0; t < t1; ++t) {
        dot(a.b[0] + t * bytes, x, p.k, out);
        const size_t n = std::min<size_t>(kTileRows, p.rows - t * kTileRows);
        for (size_t r = 0; r < n; ++r) out[r] *= inv_rms;
        store_tile(out, 0, 1, n, p.accumulate, y + t * kTileRows, 0);
    }
}

// The default GEMV: x in 16 bits where the type has that product (q8_0, q4_0, q4_1; twice the
// fp32 speed for 1e-5 of the products' scale, tile_dot.h), else fp32.
void gemv(const CpuArgs& a, size_t begin, size_t end) {
    const TensorType type = TensorType(a.variant);
    gemv_tiles(a, begin, end, tile_gemv(type, XForm::kInt16) ? XForm::kInt16 : XForm::kFloat);
}
void gemv_i8(const CpuArgs& a, size_t begin, size_t end) { gemv_tiles(a, begin, end, XForm::kInt8); }

// gemm_workgroups' weight tile: the two 32-row tiles of rows [n0, n0 + 64).
void fill_tiles(const CpuArgs& a, size_t n0, size_t nt, size_t k0, size_t kc, float (*wt)[kGemmTile]) {
    const auto& p = a.p<GemmParams>();
    const TensorType type = TensorType(a.variant);
    const TileLayout& l = layout_of(a);
    const size_t bs = type_traits(l.base).block_size, bytes = tile_bytes(l, p.k);
    const TileUnpackFn unpack = tile_unpack(type);
    for (size_t half = 0; half < kGemmTile / kTileRows; ++half) {
        const size_t c0 = half * kTileRows;
        if (c0 >= nt) {
            for (size_t kk = 0; kk < kc; ++kk) std::fill(wt[kk] + c0, wt[kk] + c0 + kTileRows, 0.0f);
            continue;
        }
        unpack(type, a.b[0] + (n0 + c0) / kTileRows * bytes, k0 / bs, kc / bs, wt, c0);
    }
}

// A step of at most this many rows runs each row as the GEMV's products, reading each tile
// once for all the rows (it stays in L1): unpacking the weights to panels, which a longer GEMM
// shares among its rows, costs more than the products of a few. Float tiles take all the rows
// at once (tile_rows: each column converted once). The integer GEMMs' panels cost less (their
// products are twice an fp32 FMA's): a step of one or two rows takes the GEMV's products there,
// and up to kIntRows rows where the tile has a product of several rows at once (tile_int_rows:
// each chunk decoded once for all of them). bench/NOTES.md, "CPU backend: a step of few rows"
// and "CPU backend: a few rows' integer product at once".
constexpr size_t kGemvRows = 8, kIntRows = 16;
size_t short_rows(TensorType type, XForm form) {
    if (form == XForm::kFloat) return kGemvRows;
    return form == XForm::kInt16 && tile_int_rows(type) ? kIntRows : 2;
}

// gemm_workgroups' items (column block g / row_blocks), for rows [0, m) with m <= short_rows,
// each row x rounded in `form` as the GEMV rounds it.
void gemm_rows(const CpuArgs& a, size_t begin, size_t end, size_t m, XForm form) {
    const auto& p = a.p<GemmParams>();
    const TensorType type = TensorType(a.variant);
    const TileGemvFn dot = tile_gemv(type, form);
    // Products of every row at once where the tile has them (float tiles convert each column
    // once, integer ones decode each chunk once); else one row at a time.
    const TileRowsFn float_rows = form == XForm::kFloat && m > 1 ? tile_rows(type) : nullptr;
    const TileIntRowsFn int_rows = form == XForm::kInt16 && m > 1 ? tile_int_rows(type) : nullptr;
    const size_t bytes = tile_bytes(layout_of(a), p.k), row_blocks = a.groups[1];
    thread_local RowX buffers[kIntRows];
    TileX x[kIntRows];
    for (size_t i = 0; i < m; ++i) x[i] = row_x(type, form, a.at<const float>(1) + i * p.ldx, p.k, buffers[i]);
    alignas(64) float out[kIntRows * kTileRows];
    for (size_t g = begin; g < end; ++g) {
        if (g % row_blocks != 0) continue;  // rows past the first block: none in so short a step
        const size_t n0 = g / row_blocks * kGemmTile;
        for (size_t c0 = n0; c0 < std::min(n0 + kGemmTile, size_t(p.n)); c0 += kTileRows) {
            const uint8_t* tile = a.b[0] + c0 / kTileRows * bytes;
            const size_t n = std::min<size_t>(kTileRows, p.n - c0);
            if (float_rows || int_rows) {
                if (float_rows)
                    float_rows(tile, a.at<const float>(1), p.ldx, m, p.k, out);
                else
                    int_rows(tile, x, m, p.k, out);
                store_tile(out, kTileRows, m, n, p.accumulate, a.at<float>(2) + c0, p.ldy);
                continue;
            }
            for (size_t i = 0; i < m; ++i) {
                dot(tile, x[i], p.k, out);
                store_tile(out, 0, 1, n, p.accumulate, a.at<float>(2) + i * p.ldy + c0, 0);
            }
        }
    }
}

// A GEMM whose steps of up to short_rows(Form) rows run each row as the GEMV's product with x
// in `Form`, and longer steps as `Long`.
template <XForm Form, void (*Long)(const CpuArgs&, size_t, size_t)>
void gemm_short_or(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<GemmParams>();
    const auto& step = *a.at<const StepState>(3);
    const size_t m = std::min<size_t>(p.m, step.n_tokens);
    if (m > short_rows(TensorType(a.variant), Form) || !tile_gemv(TensorType(a.variant), Form))
        return Long(a, begin, end);
    if (AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows)) gemm_rows(a, begin, end, m, Form);
}

// The fp32 GEMM on panels of weights unpacked to floats.
void gemm_panels(const CpuArgs& a, size_t begin, size_t end) { gemm_workgroups(a, begin, end, fill_tiles); }

void gemm(const CpuArgs& a, size_t begin, size_t end) { gemm_short_or<XForm::kFloat, gemm_panels>(a, begin, end); }

// The int8 mode's GEMM: each token row is the GEMV's integer-dot product over the workgroup's
// two tiles, x rounded the same way, so prefill and decode carry the same rounding. A tile
// (36 KB of q4_0 at k = 2048) stays in L2 across the 64 rows.
void gemm_i8(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<GemmParams>();
    const auto& step = *a.at<const StepState>(3);
    if (!AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows)) return;
    const size_t m_end = std::min(p.m, step.n_tokens);
    const TensorType type = TensorType(a.variant);
    const size_t bytes = tile_bytes(layout_of(a), p.k);
    const TileGemvFn dot = tile_gemv(type, XForm::kInt8);
    thread_local RowX buffers;
    alignas(32) float out[kTileRows];
    for (size_t g = begin; g < end; ++g) {
        const size_t n0 = (g % a.groups[0]) * kGemmTile, m0 = (g / a.groups[0]) * kGemmTile;
        for (size_t i = m0; i < std::min(m0 + kGemmTile, m_end); ++i) {
            const TileX x = row_x(type, XForm::kInt8, a.at<const float>(1) + i * p.ldx, p.k, buffers);
            for (size_t c0 = n0; c0 < std::min(n0 + kGemmTile, size_t(p.n)); c0 += kTileRows) {
                dot(a.b[0] + c0 / kTileRows * bytes, x, p.k, out);
                store_tile(out, 0, 1, std::min<size_t>(kTileRows, p.n - c0), p.accumulate,
                           a.at<float>(2) + i * p.ldy + c0, 0);
            }
        }
    }
}

}  // namespace

void register_tiles(void (*add_row)(const KernelRow&)) {
    // Names and the interfaces they borrow live as long as the registry (a deque keeps them put).
    static std::deque<std::string> names;
    const TensorType types[] = {TensorType::F32_T32,  TensorType::F16_T32,  TensorType::BF16_T32, TensorType::Q8_0_T32,
                                TensorType::Q4_0_T32, TensorType::Q4_1_T32, TensorType::Q4_K_T32, TensorType::Q5_K_T32,
                                TensorType::Q6_K_T32, TensorType::Q5_0_T32, TensorType::Q5_1_T32};
    for (TensorType t : types) {
        for (const bool is_gemv : {true, false}) {
            const char* kernel = is_gemv ? "gemv" : "gemm";
            const std::string& name = names.emplace_back(variant_name(kernel, t));
            const std::string& interface = names.emplace_back(variant_name(kernel, tile_layout(t)->base));
            add_row({name.c_str(), {is_gemv ? gemv : gemm, uint32_t(t), is_gemv ? 4u : 1u, interface.c_str()}});
            // The integer-dot GEMV and GEMM, which a CPU device in int8 mode picks (Pipeline). Not for
            // q8_0: reading 34 bytes per 32 weights, its fp32 GEMV already runs at memory speed
            // and measured faster (bench/NOTES.md, "CPU backend: tile-major weights, interleaved
            // FMA chains, integer dot products").
            if (tile_gemv(t, XForm::kInt8) && t != TensorType::Q8_0_T32)
                add_row({names.emplace_back(name + "_i8").c_str(),
                         {is_gemv ? gemv_i8 : gemm_i8, uint32_t(t), is_gemv ? 4u : 1u, interface.c_str()}});
            // The integer GEMM of the quantized tiles (x in 16 bits, gemm_vnni.h).
            if (!is_gemv && type_traits(t).block_size > 1 && use_avx512_vnni()) {
                add_row({names.emplace_back(name + "_i16").c_str(),
                         {gemm_short_or<XForm::kInt16, gemm_vnni>, uint32_t(t), 1u, interface.c_str()}});
                add_row({names.emplace_back(name + "_x8").c_str(),
                         {gemm_short_or<XForm::kInt8, gemm_vnni8>, uint32_t(t), 1u, interface.c_str()}});
            }
            // The bf16 GEMM of the float tiles (gemm_bf16.h) past the short GEMM's rows.
            if (!is_gemv && type_traits(t).block_size == 1 && use_avx512_bf16())
                add_row({names.emplace_back(name + "_bf16").c_str(),
                         {gemm_short_or<XForm::kFloat, gemm_bf16>, uint32_t(t), 1u, interface.c_str()}});
        }
    }
}

}  // namespace akunu::cpu
