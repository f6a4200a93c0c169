// Model validation (docs/architecture.md, "Loading a model", step 4): before anything is
// allocated, check that every tensor the architecture needs is present, with the shape the
// config implies and a type akunu supports.
#pragma once

#include <cstdint>
#include <vector>

#include "akunu/model/model_config.h"
#include "akunu/formats/model_files.h"

namespace akunu {

struct ExpectedTensor {
    TensorRole role;
    int layer;  // -1 for model-level tensors
    bool required;
    std::vector<uint64_t> shape;  // NumPy order
};

// The tensors a model of this config has, with their shapes.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c);

// Throws one akunu::Error listing every problem found (missing tensor, wrong shape, unsupported
// type), each naming the file, the tensor, and expected vs found. A config-only model passes.
void validate_model(const ModelFiles& files, const ModelConfig& c);

}  // namespace akunu
