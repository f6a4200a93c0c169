// Small helpers for TensorInfo.
#include "akunu/formats/tensor_info.h"

namespace akunu {

std::string shape_string(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace akunu
