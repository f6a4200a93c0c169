// Launchers for akunu's elementwise, normalisation and GEMV kernels. Each checks its arguments
// against the buffers (a wrong shape is an akunu::Error naming the operand, never an
// out-of-bounds read), picks the variant from the dtype table and records one dispatch.
#pragma once

#include "akunu/command_list.h"
#include "akunu/dtype.h"

namespace akunu::kernels {

// out[0:n] = value (f32, f16), or the raw 32-bit pattern `bits` for u32.
void fill(CommandList& cl, const Buffer& out, DType dtype, size_t n, float value, uint32_t bits = 0);

// dst[0:bytes] = src[0:bytes] on the compute queue; bytes must be a multiple of 4.
void copy(CommandList& cl, const Buffer& src, const Buffer& dst, size_t bytes);

// c[0:n] = a[0:n] + b[0:n]; dtype f32 or f16.
void add(CommandList& cl, const Buffer& a, const Buffer& b, const Buffer& c, DType dtype, size_t n);

// y[rows, dim] = rmsnorm(x[rows, dim]) * (w[dim] + weight_offset); dtype f32 or f16.
void rmsnorm(CommandList& cl, const Buffer& x, const Buffer& w, const Buffer& y, DType dtype, size_t rows,
             size_t dim, float eps, float weight_offset = 0.0f);

// y[rows] f32 = W[rows, k] (wtype f16 or f32) · x[k] f32.
void gemv(CommandList& cl, const Buffer& w, DType wtype, const Buffer& x, const Buffer& y, size_t rows, size_t k);

}  // namespace akunu::kernels
