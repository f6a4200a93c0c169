// The dtype traits table.
#include "akunu/formats/dtype.h"

#include "akunu/core/error.h"

namespace akunu {

static const DTypeTraits kDTypes[] = {
    {DType::kF32, "f32", 4, "f"}, {DType::kF16, "f16", 2, "e"}, {DType::kBF16, "bf16", 2, "H"},
    {DType::kU32, "u32", 4, "I"}, {DType::kI32, "i32", 4, "i"}, {DType::kU8, "u8", 1, "B"},
    {DType::kI8, "i8", 1, "b"},
};

// NumPy spellings of the same types.
static const struct {
    const char* name;
    DType type;
} kAliases[] = {
    {"float32", DType::kF32}, {"float16", DType::kF16}, {"bfloat16", DType::kBF16}, {"uint32", DType::kU32},
    {"int32", DType::kI32},   {"uint8", DType::kU8},    {"int8", DType::kI8},
};

const DTypeTraits& dtype_traits(DType type) {
    for (const auto& t : kDTypes)
        if (t.type == type) return t;
    throw Error("unknown dtype id " + std::to_string(int(type)));
}

DType parse_dtype(const std::string& name) {
    for (const auto& t : kDTypes)
        if (name == t.name) return t.type;
    for (const auto& a : kAliases)
        if (name == a.name) return a.type;
    std::string known;
    for (const auto& t : kDTypes) known += std::string(known.empty() ? "" : ", ") + t.name;
    throw Error("unknown dtype '" + name + "'; expected one of " + known);
}

}  // namespace akunu
