// Shared by the kernel launcher files (kernels*.cpp): argument checks, the
// workgroup grid, and emitting one DispatchCmd. Internal to the launchers; kernels.h is the API.
#pragma once

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "akunu/vulkan/device.h"
#include "akunu/vulkan/dispatch.h"
#include "akunu/formats/dtype.h"
#include "akunu/core/error.h"
#include "akunu/formats/tensor_types.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu::kernels::launch {

// A dispatch's workgroups, and how they follow a prefill chunk's token count where the
// dispatch is a chunk's (DispatchSink::chunk_rows, ChunkRows). Spread by grid_for, a count
// follows the tokens linearly: every such kernel lays its work out row-major over the tokens.
struct Grid {
    uint32_t x, y;
    ChunkRows::Axis axis = ChunkRows::Axis::kNone;
    uint32_t min_rows = 0, max_rows = 0;  // the kernel's row window (ChunkRows)
    uint32_t position_block = 0;  // groups along y cover the cache in these blocks (DispatchCmd)
    bool untiled = false;  // the counts follow a batched step's untiled rows (ChunkRows)
};

// Spreads `groups` workgroups over a 2-D grid within the device's per-dimension limit.
inline Grid grid_for(const DispatchSink& s, size_t groups) {
    const size_t max_x = s.device().profile().max_workgroup_count_x;
    const size_t x = std::max<size_t>(1, std::min(groups, max_x));
    const size_t y = (groups + x - 1) / x;
    AKUNU_CHECK(y <= 65535, "problem too large for one dispatch: " + std::to_string(groups) + " workgroups");
    return {uint32_t(x), uint32_t(std::max<size_t>(y, 1)), ChunkRows::Axis::kLinear};
}

inline void check_bytes(const Binding& b, size_t need, const char* kernel, const char* operand) {
    AKUNU_CHECK(b.buffer && *b.buffer, std::string(kernel) + ": " + operand + " is not a buffer");
    AKUNU_CHECK(b.bytes() >= need, std::string(kernel) + ": " + operand + " needs " + std::to_string(need) +
                                       " bytes but its binding holds " + std::to_string(b.bytes()));
}

inline void check_fits(const Binding& b, size_t elements, DType dtype, const char* kernel, const char* operand) {
    check_bytes(b, elements * dtype_traits(dtype).bytes, kernel, operand);
}

inline void check_dtype(DType dtype, std::initializer_list<DType> allowed, const char* kernel) {
    for (DType d : allowed)
        if (d == dtype) return;
    throw Error(std::string(kernel) + " has no variant for dtype " + dtype_traits(dtype).name);
}

inline uint32_t checked_u32(size_t v, const char* what) {
    AKUNU_CHECK(v > 0 && v <= 0xFFFFFFFFu, std::string(what) + " must be in [1, 2^32)");
    return uint32_t(v);
}

// Throws unless a row of `k` elements is a whole number of the weight type's blocks.
inline void check_row_blocks(const TensorTypeTraits& t, size_t k, const char* kernel, const char* what) {
    AKUNU_CHECK(k % t.block_size == 0, std::string(kernel) + ": " + what + " = " + std::to_string(k) +
                                           " is not a whole number of " + t.name + " blocks (" +
                                           std::to_string(t.block_size) + " elements each)");
}

// Shared checks and predicates, defined in kernels.cpp and kernels_gemv.cpp.
void check_cache(const KvBindings& c, size_t n_kv, size_t max_len, size_t head_dim, const char* kernel);

// The attention launchers' shared pieces (kernels.cpp). A cache kernel's variant
// ("attention_split_int4_blocks": format, then layout) and its bindings: `first` (bindings 0 to 4
// with K and V at 1 and 2), then a quantized cache's scales at 5 and 6 unless they sit in blocks.
std::string cache_variant(const char* kernel, const KvBindings& c);
std::vector<Binding> cache_bindings(std::vector<Binding> first, const KvBindings& c);
// An attention kernel over a cache with a recent window (kv_recent.glsl): the "_recent"
// variant, the step's [q | k | v] rows and the two rings as bindings 9 to 11 (after the others).
std::string attention_variant(const char* kernel, const KvBindings& c);
std::vector<Binding> with_recent(std::vector<Binding> b, const KvBindings& c, const char* kernel);
// How attention_split covers a cache row (its specialization constants TEAM and LANE_VECS):
// lanes per row, a power of two inside a subgroup and at most 32, and the 16-byte vectors each
// lane loads. An f16 row takes 8 values a vector, so heads up to 256 fit a subgroup of 32; fewer
// lanes per row (4 for a head of 64, 4 or 8 for 128) ran slower behind long contexts
// (bench/NOTES.md, "Decode attention as online softmax per team"). A quantized row takes one
// 8-byte vector of codes per lane (16 4-bit or 8 8-bit codes), where K's and V's rows are whole
// vectors and fit the team; LANE_VECS = 0 elsewhere, the kernel's scalar reads.
struct AttentionSplitShape {
    uint32_t team = 1, lane_vecs = 1;
};
AttentionSplitShape attention_split_shape(const DeviceProfile& d, uint32_t head_dim, KvDType cache = KvDType::kF16);
// The checks that flash_attention, attention_rows and the batch's query tiles share, and their
// parameters (cache_rows: the rows per KV head that the kernel indexes by, kv_rows.glsl).
FlashAttentionParams flash_params(const Binding& q, const KvBindings& cache, const Binding& out, const FlashShape& f,
                                  uint32_t cache_rows, const char* kernel);
void check_handoff(const GemvHandoff* h, bool takes, const char* kernel);
bool block32(TensorType wtype);  // Q8_0, Q4_0, Q4_1
bool tiles32(TensorType wtype);  // their tile-major forms
// gemm() in gemm_rows.comp (gemm_tile_rows says where): the checks are gemm()'s.
void emit_gemm_rows(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y,
                    const GemmShape& g, const GemmParams& p, const Binding& step);

template <class P>
void emit(DispatchSink& s, const std::string& kernel, std::vector<uint32_t> spec, std::vector<Binding> bindings,
          const P& params, Grid g, bool awaits_previous = false) {
    DispatchCmd cmd;
    cmd.label = s.label();
    cmd.pipeline = &s.device().pipeline(kernel, spec);
    cmd.bindings = std::move(bindings);
    cmd.params.resize(sizeof(P));
    std::memcpy(cmd.params.data(), &params, sizeof(P));
    cmd.groups[0] = g.x;
    cmd.groups[1] = g.y;
    if (s.chunk_rows()) cmd.chunk = {g.axis, s.chunk_rows(), g.min_rows, g.max_rows, g.untiled};
    cmd.position_block = g.position_block;
    cmd.awaits_previous = awaits_previous;
    s.dispatch(cmd);
}

}  // namespace akunu::kernels::launch
