// Element types of engine buffers: one traits table read by kernels (variant suffix), the
// Python bindings (NumPy format) and size checks.
#pragma once

#include <cstddef>
#include <string>

namespace akunu {

enum class DType { kF32, kF16, kBF16, kU32, kI32, kU8, kI8 };

struct DTypeTraits {
    DType type;
    const char* name;  // "f32": also the kernel-variant suffix (fill_f32)
    size_t bytes;  // per element
    const char* numpy_format;  // buffer-protocol format; bf16 is exposed as raw uint16
};

const DTypeTraits& dtype_traits(DType type);
// Accepts akunu names ("f16") and NumPy names ("float16"); throws listing the valid ones.
DType parse_dtype(const std::string& name);

}  // namespace akunu
