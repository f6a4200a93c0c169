// GGUF reader (versions 2 and 3), backed by a memory map and lazy: opening parses the header,
// the metadata and the tensor infos, and touches no tensor data.
//
// Everything read is checked against the file: counts against the bytes that remain, tensor
// ranges against the file size, offsets against general.alignment, tensors against each other
// (no overlaps) and element counts against 64-bit overflow. A malformed file is an
// akunu::Error naming the file and what was wrong, never an out-of-bounds read.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "akunu/formats/mapped_file.h"
#include "akunu/formats/tensor_info.h"

namespace akunu {

// GGUF metadata value types (gguf.md, "gguf_metadata_value_type").
enum class GgufType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};
const char* gguf_type_name(GgufType type);

struct GgufValue;
struct GgufArray {
    GgufType element_type;
    std::vector<GgufValue> items;
};

struct GgufValue {
    GgufType type;
    // Integers of every width widen to int64/uint64, floats to double; strings and arrays as is.
    std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;

    bool is_integer() const;
    bool is_number() const;  // integer or float
    int64_t as_int(const std::string& key) const;  // throws unless an integer that fits
    double as_double(const std::string& key) const;  // any number
    bool as_bool(const std::string& key) const;
    const std::string& as_string(const std::string& key) const;
    const GgufArray& as_array(const std::string& key) const;
};

class GgufFile {
public:
    static std::shared_ptr<GgufFile> open(std::shared_ptr<MappedFile> file);

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }
    const std::string& path() const { return file_->path(); }
    const MappedFile& file() const { return *file_; }

    // Keys in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
    const GgufValue* find(const std::string& key) const;
    const std::vector<TensorInfo>& tensors() const { return tensors_; }

private:
    std::shared_ptr<MappedFile> file_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::map<std::string, size_t> index_;
    std::vector<TensorInfo> tensors_;
};

}  // namespace akunu
