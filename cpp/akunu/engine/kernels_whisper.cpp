// Launchers of the encoder-decoder kernels (kernels.h, "Encoder-decoders"): the Conv1d columns
// and row copies through indices.
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

}  // namespace akunu::kernels
