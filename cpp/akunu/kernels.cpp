// Argument checks, variant choice and workgroup geometry for the kernels in kernels.h.
#include "akunu/kernels.h"

#include <algorithm>

#include "akunu/error.h"
#include "params.h"

namespace akunu::kernels {

namespace {

// Elementwise kernels use 256 invocations per workgroup (their local_size_x).
constexpr uint32_t kElementwiseGroup = 256;
// GEMV geometry: invocations per workgroup and rows per workgroup (gemv.comp MAX_ROWS >= this).
constexpr uint32_t kGemvGroup = 128;
constexpr uint32_t kGemvRows = 4;

struct Grid { uint32_t x, y; };

// Spreads `groups` workgroups over a 2-D grid within the device's per-dimension limit.
Grid grid_for(const CommandList& cl, size_t groups) {
    const size_t max_x = cl.device().profile().max_workgroup_count_x;
    const size_t x = std::min(groups, max_x);
    const size_t y = (groups + x - 1) / x;
    AKUNU_CHECK(y <= 65535, "problem too large for one dispatch: " + std::to_string(groups) + " workgroups");
    return {uint32_t(x), uint32_t(y)};
}

void check_fits(const Buffer& b, size_t elements, DType dtype, const char* kernel, const char* operand) {
    const size_t need = elements * dtype_traits(dtype).bytes;
    AKUNU_CHECK(b.size() >= need, std::string(kernel) + ": " + operand + " needs " + std::to_string(need) +
                                      " bytes (" + std::to_string(elements) + " x " + dtype_traits(dtype).name +
                                      ") but its buffer holds " + std::to_string(b.size()));
}

void check_dtype(DType dtype, std::initializer_list<DType> allowed, const char* kernel) {
    for (DType d : allowed)
        if (d == dtype) return;
    throw Error(std::string(kernel) + " has no variant for dtype " + dtype_traits(dtype).name);
}

std::string variant(const char* kernel, DType dtype) { return std::string(kernel) + "_" + dtype_traits(dtype).name; }

uint32_t checked_u32(size_t v, const char* what) {
    AKUNU_CHECK(v > 0 && v <= 0xFFFFFFFFu, std::string(what) + " must be in [1, 2^32)");
    return uint32_t(v);
}

}  // namespace

void fill(CommandList& cl, const Buffer& out, DType dtype, size_t n, float value, uint32_t bits) {
    check_dtype(dtype, {DType::kF32, DType::kF16, DType::kU32}, "fill");
    check_fits(out, n, dtype, "fill", "out");
    FillParams p{checked_u32(n, "fill: n"), value, bits};
    const Grid g = grid_for(cl, (n + kElementwiseGroup - 1) / kElementwiseGroup);
    cl.dispatch(cl.device().pipeline(variant("fill", dtype)), {{&out}}, p, g.x, g.y);
}

void copy(CommandList& cl, const Buffer& src, const Buffer& dst, size_t bytes) {
    AKUNU_CHECK(bytes % 4 == 0, "copy: " + std::to_string(bytes) + " bytes is not a whole number of 32-bit words");
    check_fits(src, bytes / 4, DType::kU32, "copy", "src");
    check_fits(dst, bytes / 4, DType::kU32, "copy", "dst");
    const size_t words = bytes / 4;
    CopyParams p{checked_u32(words, "copy: words")};
    const size_t per_group = (words % 4 == 0 ? 4 : 1) * kElementwiseGroup;
    const Grid g = grid_for(cl, (words + per_group - 1) / per_group);
    cl.dispatch(cl.device().pipeline("copy_u32"), {{&src}, {&dst}}, p, g.x, g.y);
}

void add(CommandList& cl, const Buffer& a, const Buffer& b, const Buffer& c, DType dtype, size_t n) {
    check_dtype(dtype, {DType::kF32, DType::kF16}, "add");
    check_fits(a, n, dtype, "add", "a");
    check_fits(b, n, dtype, "add", "b");
    check_fits(c, n, dtype, "add", "c");
    AddParams p{checked_u32(n, "add: n")};
    const Grid g = grid_for(cl, (n + kElementwiseGroup - 1) / kElementwiseGroup);
    cl.dispatch(cl.device().pipeline(variant("add", dtype)), {{&a}, {&b}, {&c}}, p, g.x, g.y);
}

void rmsnorm(CommandList& cl, const Buffer& x, const Buffer& w, const Buffer& y, DType dtype, size_t rows,
             size_t dim, float eps, float weight_offset) {
    check_dtype(dtype, {DType::kF32, DType::kF16}, "rmsnorm");
    check_fits(x, rows * dim, dtype, "rmsnorm", "x");
    check_fits(w, dim, dtype, "rmsnorm", "w");
    check_fits(y, rows * dim, dtype, "rmsnorm", "y");
    AKUNU_CHECK(eps >= 0.0f, "rmsnorm: eps must be >= 0");
    RmsNormParams p{checked_u32(rows, "rmsnorm: rows"), checked_u32(dim, "rmsnorm: dim"), eps, weight_offset};
    const uint32_t group = std::min<uint32_t>(256, cl.device().profile().max_workgroup_invocations);
    const Grid g = grid_for(cl, rows);
    cl.dispatch(cl.device().pipeline(variant("rmsnorm", dtype), {group}), {{&x}, {&w}, {&y}}, p, g.x, g.y);
}

void gemv(CommandList& cl, const Buffer& w, DType wtype, const Buffer& x, const Buffer& y, size_t rows, size_t k) {
    check_dtype(wtype, {DType::kF16, DType::kF32}, "gemv");
    check_fits(w, rows * k, wtype, "gemv", "W");
    check_fits(x, k, DType::kF32, "gemv", "x");
    check_fits(y, rows, DType::kF32, "gemv", "y");
    GemvParams p{checked_u32(rows, "gemv: rows"), checked_u32(k, "gemv: k")};
    const Grid g = grid_for(cl, (rows + kGemvRows - 1) / kGemvRows);
    cl.dispatch(cl.device().pipeline(variant("gemv", wtype), {kGemvGroup, kGemvRows}), {{&w}, {&x}, {&y}}, p, g.x,
                g.y);
}

}  // namespace akunu::kernels
