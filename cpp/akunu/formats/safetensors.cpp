// Safetensors parsing with nlohmann-json.
#include "akunu/formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "akunu/core/error.h"
#include "akunu/formats/json_file.h"

namespace akunu {

namespace {

// The dtypes akunu reads, by their safetensors names.
struct StDType {
    const char* name;
    TensorType type;
};
const StDType kDTypes[] = {
    {"F32", TensorType::F32}, {"F16", TensorType::F16}, {"BF16", TensorType::BF16}, {"I8", TensorType::I8},
    {"U8", TensorType::U8},   {"U32", TensorType::U32}, {"I32", TensorType::I32},   {"I64", TensorType::I64},
};

constexpr uint64_t kMaxHeader = 100ull << 20;  // the safetensors format's own limit

[[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw Error(path + ": malformed safetensors file: " + what);
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(std::shared_ptr<MappedFile> file) {
    const std::string& path = file->path();
    if (file->size() < 8) fail(path, "shorter than the 8-byte header length");
    uint64_t header_len;
    std::memcpy(&header_len, file->data(), 8);
    if (header_len < 2 || header_len > kMaxHeader || header_len > file->size() - 8)
        fail(path, "header length " + std::to_string(header_len) + " does not fit the file of " +
                       std::to_string(file->size()) + " bytes");
    const char* text = reinterpret_cast<const char*>(file->data() + 8);
    const nlohmann::json header = parse_json(std::string_view(text, header_len), path + ": the header");
    if (!header.is_object()) fail(path, "the header is not a JSON object");

    auto st = std::make_shared<SafetensorsFile>();
    st->file_ = file;
    const uint64_t data_start = 8 + header_len;
    const uint64_t data_size = file->size() - data_start;
    struct Range {
        uint64_t begin, end;
        size_t index;
    };
    std::vector<Range> ranges;

    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const nlohmann::json& e = it.value();
        if (name == "__metadata__") {
            if (!e.is_object()) fail(path, "__metadata__ is not an object");
            for (auto m = e.begin(); m != e.end(); ++m)
                if (m.value().is_string()) st->metadata_[m.key()] = m.value().get<std::string>();
            continue;
        }
        if (!e.is_object()) fail(path, "entry for tensor " + name + " is not an object");
        if (!e.contains("dtype") || !e["dtype"].is_string()) fail(path, "tensor " + name + " has no dtype string");
        if (!e.contains("shape") || !e["shape"].is_array()) fail(path, "tensor " + name + " has no shape array");
        if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
            fail(path, "tensor " + name + " has no [begin, end] data_offsets");
        const std::string dtype = e["dtype"].get<std::string>();
        const StDType* dt = nullptr;
        for (const auto& d : kDTypes)
            if (dtype == d.name) dt = &d;
        if (!dt) {
            std::string known;
            for (const auto& d : kDTypes) known += std::string(known.empty() ? "" : ", ") + d.name;
            throw Error(path + ": unsupported dtype " + dtype + " in tensor " + name + " (akunu reads " + known + ")");
        }
        TensorInfo t;
        t.name = name;
        t.type = &type_traits(dt->type);
        t.file = path;
        uint64_t n = 1;
        for (const auto& d : e["shape"]) {
            if (!d.is_number_unsigned()) fail(path, "tensor " + name + ": shape holds a non-integer or negative value");
            const uint64_t v = d.get<uint64_t>();
            if (v != 0 && n > UINT64_MAX / v) fail(path, "tensor " + name + ": element count overflows 64 bits");
            n *= v;
            t.shape.push_back(v);
        }
        t.n_elements = n;
        const auto& off = e["data_offsets"];
        if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            fail(path, "tensor " + name + ": data_offsets are not non-negative integers");
        const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
        if (begin > end || end > data_size)
            fail(path, "tensor " + name + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                           "] lie outside the " + std::to_string(data_size) + " bytes of data; is the file truncated?");
        if (n > UINT64_MAX / t.type->block_bytes || n * t.type->block_bytes != end - begin)
            fail(path, "tensor " + name + ": shape " + shape_string(t.shape) + " of " + dtype + " needs " +
                           std::to_string(n * t.type->block_bytes) + " bytes, data_offsets give " +
                           std::to_string(end - begin));
        t.bytes = size_t(end - begin);
        t.data = file->data() + data_start + begin;
        ranges.push_back({begin, end, st->tensors_.size()});
        st->tensors_.push_back(std::move(t));
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].begin < ranges[i - 1].end)
            fail(path, "tensors " + st->tensors_[ranges[i - 1].index].name + " and " +
                           st->tensors_[ranges[i].index].name + " overlap");
    // Keep the file's order stable for listing: sorted by name, as safetensors' own tools do.
    std::sort(st->tensors_.begin(), st->tensors_.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    return st;
}

}  // namespace akunu
