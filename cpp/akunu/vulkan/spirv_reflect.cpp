// SPIR-V parsing for reflect_spirv(). Only the instructions that describe resources are read:
// decorations, types, constants and variables (SPIR-V spec, section 2.3 "Physical Layout").
#include "akunu/vulkan/spirv_reflect.h"

#include <algorithm>
#include <map>
#include <set>

#include "akunu/core/error.h"

namespace akunu {

namespace {

// Opcodes, decorations and storage classes from the SPIR-V specification.
enum : uint32_t {
    kOpTypeInt = 21,
    kOpTypeFloat = 22,
    kOpTypeVector = 23,
    kOpTypeMatrix = 24,
    kOpTypeArray = 28,
    kOpTypeRuntimeArray = 29,
    kOpTypeStruct = 30,
    kOpTypePointer = 32,
    kOpConstant = 43,
    kOpVariable = 59,
    kOpDecorate = 71,
    kOpMemberDecorate = 72,
    kOpCapability = 17,
    kCapabilityCooperativeMatrixKHR = 6022,
};
enum : uint32_t {
    kDecArrayStride = 6,
    kDecMatrixStride = 7,
    kDecNonWritable = 24,
    kDecBinding = 33,
    kDecDescriptorSet = 34,
    kDecOffset = 35
};
enum : uint32_t { kStorageUniform = 2, kStoragePushConstant = 9, kStorageStorageBuffer = 12 };

struct Type {
    uint32_t op = 0;
    std::vector<uint32_t> operands;  // the instruction's words after the result id
};

struct Module {
    std::map<uint32_t, Type> types;
    std::map<uint32_t, uint32_t> constants;  // id -> low word
    std::map<uint32_t, std::map<uint32_t, uint32_t>> decorations;  // id -> decoration -> literal
    std::map<uint32_t, std::map<uint32_t, std::map<uint32_t, uint32_t>>> member_decorations;
    struct Variable {
        uint32_t pointer_type, storage;
    };
    std::map<uint32_t, Variable> variables;
};

// Bytes a value of type `id` occupies in an explicitly laid-out block.
uint32_t type_size(const Module& m, uint32_t id, const std::string& name) {
    auto it = m.types.find(id);
    AKUNU_CHECK(it != m.types.end(), "SPIR-V of kernel '" + name + "': unknown type id " + std::to_string(id));
    const Type& t = it->second;
    switch (t.op) {
        case kOpTypeInt:
        case kOpTypeFloat: return t.operands[0] / 8;
        case kOpTypeVector: return t.operands[1] * type_size(m, t.operands[0], name);
        case kOpTypeArray: {
            auto stride = m.decorations.count(id) ? m.decorations.at(id) : std::map<uint32_t, uint32_t>{};
            uint32_t length = m.constants.at(t.operands[1]);
            uint32_t elem =
                stride.count(kDecArrayStride) ? stride.at(kDecArrayStride) : type_size(m, t.operands[0], name);
            return length * elem;
        }
        case kOpTypeStruct: {
            uint32_t end = 0;
            auto md = m.member_decorations.find(id);
            for (uint32_t i = 0; i < t.operands.size(); ++i) {
                uint32_t offset = 0;
                if (md != m.member_decorations.end() && md->second.count(i) && md->second.at(i).count(kDecOffset))
                    offset = md->second.at(i).at(kDecOffset);
                end = std::max(end, offset + type_size(m, t.operands[i], name));
            }
            return end;
        }
        default:
            throw Error("SPIR-V of kernel '" + name + "': push constants use a type akunu cannot size (op " +
                        std::to_string(t.op) + ")");
    }
}

bool block_is_read_only(const Module& m, uint32_t struct_id, uint32_t variable_id) {
    auto vd = m.decorations.find(variable_id);
    if (vd != m.decorations.end() && vd->second.count(kDecNonWritable)) return true;
    auto st = m.types.find(struct_id);
    if (st == m.types.end() || st->second.op != kOpTypeStruct) return false;
    auto md = m.member_decorations.find(struct_id);
    for (uint32_t i = 0; i < st->second.operands.size(); ++i)
        if (md == m.member_decorations.end() || !md->second.count(i) || !md->second.at(i).count(kDecNonWritable))
            return false;
    return true;
}

}  // namespace

ShaderInterface reflect_spirv(const uint32_t* words, size_t n_words, const std::string& name) {
    AKUNU_CHECK(n_words >= 5 && words[0] == 0x07230203, "kernel '" + name + "' is not a SPIR-V module");
    Module m;
    bool cooperative_matrix_khr = false;
    for (size_t i = 5; i < n_words;) {
        const uint32_t count = words[i] >> 16, op = words[i] & 0xFFFF;
        AKUNU_CHECK(count > 0 && i + count <= n_words, "SPIR-V of kernel '" + name + "' is truncated");
        const uint32_t* w = words + i;
        switch (op) {
            case kOpTypeInt:
            case kOpTypeFloat:
            case kOpTypeVector:
            case kOpTypeMatrix:
            case kOpTypeArray:
            case kOpTypeRuntimeArray:
            case kOpTypeStruct:
            case kOpTypePointer: m.types[w[1]] = Type{op, std::vector<uint32_t>(w + 2, w + count)}; break;
            case kOpConstant:
                if (count >= 4) m.constants[w[2]] = w[3];
                break;
            case kOpDecorate:
                if (count >= 3) m.decorations[w[1]][w[2]] = count >= 4 ? w[3] : 1;
                break;
            case kOpMemberDecorate:
                if (count >= 4) m.member_decorations[w[1]][w[2]][w[3]] = count >= 5 ? w[4] : 1;
                break;
            case kOpVariable: m.variables[w[2]] = {w[1], w[3]}; break;
            case kOpCapability:
                cooperative_matrix_khr =
                    cooperative_matrix_khr || (count >= 2 && w[1] == kCapabilityCooperativeMatrixKHR);
                break;
            default: break;
        }
        i += count;
    }

    ShaderInterface out;
    out.cooperative_matrix_khr = cooperative_matrix_khr;
    for (const auto& [id, var] : m.variables) {
        auto ptr = m.types.find(var.pointer_type);
        if (ptr == m.types.end() || ptr->second.op != kOpTypePointer) continue;
        const uint32_t pointee = ptr->second.operands[1];
        if (var.storage == kStoragePushConstant) {
            out.push_constant_bytes = type_size(m, pointee, name);
        } else if (var.storage == kStorageStorageBuffer || var.storage == kStorageUniform) {
            auto dec = m.decorations.find(id);
            AKUNU_CHECK(dec != m.decorations.end() && dec->second.count(kDecBinding),
                        "kernel '" + name + "' has a buffer without a binding number");
            AKUNU_CHECK(var.storage == kStorageStorageBuffer,
                        "kernel '" + name + "' uses a uniform buffer; akunu kernels bind storage buffers only");
            ShaderBinding b;
            b.set = dec->second.count(kDecDescriptorSet) ? dec->second.at(kDecDescriptorSet) : 0;
            b.binding = dec->second.at(kDecBinding);
            b.written = !block_is_read_only(m, pointee, id);
            AKUNU_CHECK(b.set == 0, "kernel '" + name + "' uses descriptor set " + std::to_string(b.set) +
                                        "; akunu kernels use set 0 only");
            out.bindings.push_back(b);
        }
    }
    std::sort(out.bindings.begin(), out.bindings.end(),
              [](const ShaderBinding& a, const ShaderBinding& b) { return a.binding < b.binding; });
    // Aliased views of one buffer (e.g. scalar and vec4 arrays) share a binding: merge them.
    std::vector<ShaderBinding> merged;
    for (const auto& b : out.bindings) {
        if (!merged.empty() && merged.back().binding == b.binding)
            merged.back().written = merged.back().written || b.written;
        else
            merged.push_back(b);
    }
    out.bindings = std::move(merged);
    return out;
}

}  // namespace akunu
