// TensorInfo: one tensor of a model file, as every reader (GGUF, safetensors) describes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "akunu/formats/tensor_types.h"

namespace akunu {

struct TensorInfo {
    std::string name;
    const TensorTypeTraits* type = nullptr;
    std::vector<uint64_t> shape;  // NumPy order, outermost first ([out, in] for a weight matrix)
    uint64_t n_elements = 0;
    size_t bytes = 0;
    const uint8_t* data = nullptr;  // into the file's memory map
    std::string file;  // the file that holds it
};

// "[2048, 256]"
std::string shape_string(const std::vector<uint64_t>& shape);

}  // namespace akunu
