// What the fuzzers and the malformed-input replay do with an input: everything a user can do
// with a model file short of running it. Every failure must be an akunu::Error.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "akunu/engine/memory_plan.h"
#include "akunu/formats/model_files.h"
#include "akunu/engine/validate.h"

namespace akunu::fuzz {

inline void exercise_config(const ModelConfig& c, const ModelFiles* files) {
    PlanOptions o;
    o.context = std::min(c.max_context, 4096);
    o.prefill_chunk = 512;
    plan_memory(c, files, o);
    for (bool sliding : {false, true}) rope_inv_freq(c, sliding);
}

inline void exercise_model(const ModelFiles& files) {
    // Dequantize (a bounded amount of) every tensor: reads must stay inside the file.
    std::vector<float> out;
    for (const auto& t : files.tensors()) {
        if (!t.type->dequant || t.n_elements > (1u << 20)) continue;
        out.resize(size_t(t.n_elements));
        dequantize(*t.type, t.data, out.data(), t.n_elements, t.name);
    }
    const ModelConfig c = load_config(files);
    validate_model(files, c);
    exercise_config(c, &files);
}

}  // namespace akunu::fuzz
