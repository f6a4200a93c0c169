// GGUF parsing. Layout (little-endian), per ggml's docs/gguf.md:
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv, n_kv x {string key, u32 type, value},
//   n_tensors x {string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset},
//   padding to general.alignment, then the tensor data (offsets are relative to its start).
// ne[0] is the fastest-varying dimension, so NumPy's shape is ne reversed.
#include "akunu/formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "akunu/core/error.h"
#include "akunu/core/utf8.h"

namespace akunu {

const char* gguf_type_name(GgufType type) {
    static const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                   "bool", "string", "array", "u64", "i64", "f64"};
    return uint32_t(type) < 13 ? kNames[uint32_t(type)] : "unknown";
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

bool GgufValue::is_integer() const {
    return std::holds_alternative<uint64_t>(value) || std::holds_alternative<int64_t>(value);
}
bool GgufValue::is_number() const { return is_integer() || std::holds_alternative<double>(value); }

static Error type_error(const std::string& key, const char* wanted, GgufType found) {
    return Error("metadata key " + key + ": expected " + wanted + ", found " + gguf_type_name(found));
}

int64_t GgufValue::as_int(const std::string& key) const {
    if (auto* u = std::get_if<uint64_t>(&value)) {
        if (*u > uint64_t(INT64_MAX))
            throw Error("metadata key " + key + ": value " + std::to_string(*u) + " is too large");
        return int64_t(*u);
    }
    if (auto* i = std::get_if<int64_t>(&value)) return *i;
    throw type_error(key, "an integer", type);
}
double GgufValue::as_double(const std::string& key) const {
    if (auto* d = std::get_if<double>(&value)) return *d;
    if (is_integer()) return double(as_int(key));
    throw type_error(key, "a number", type);
}
bool GgufValue::as_bool(const std::string& key) const {
    if (auto* b = std::get_if<bool>(&value)) return *b;
    if (is_integer()) return as_int(key) != 0;
    throw type_error(key, "a bool", type);
}
const std::string& GgufValue::as_string(const std::string& key) const {
    if (auto* s = std::get_if<std::string>(&value)) return *s;
    throw type_error(key, "a string", type);
}
const GgufArray& GgufValue::as_array(const std::string& key) const {
    if (auto* a = std::get_if<GgufArray>(&value)) return *a;
    throw type_error(key, "an array", type);
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

namespace {

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused
constexpr uint64_t kMaxAlignment = 1 << 20;
// Metadata values (array elements included) a file may hold: each costs tens of bytes in memory
// however few bytes it takes in the file, so a huge u8 array would cost 50 times its size. The
// largest vocabularies (tokens, scores, types and merges) hold under a third of this.
constexpr uint64_t kMaxMetadataValues = uint64_t(1) << 22;

class Cursor {
public:
    Cursor(const MappedFile& f) : p_(f.data()), size_(f.size()), path_(f.path()) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(path_ + ": malformed GGUF at byte " + std::to_string(pos_) + ": " + what);
    }
    void need(uint64_t n, const char* what) const {
        if (n > size_ - pos_)
            fail(std::string("file ends inside ") + what + " (needs " + std::to_string(n) + " bytes, " +
                 std::to_string(size_ - pos_) + " remain)");
    }
    template <class T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, p_ + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    std::string read_string(const char* what) {
        const uint64_t n = read<uint64_t>(what);
        need(n, what);
        std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
        pos_ += size_t(n);
        return s;
    }
    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    // Counts `n` more metadata values against kMaxMetadataValues.
    void count_values(uint64_t n, const std::string& key) {
        values_ += n;
        if (values_ > kMaxMetadataValues)
            fail("metadata key " + key + ": the metadata holds more than " + std::to_string(kMaxMetadataValues) +
                 " values (arrays included), the most akunu reads");
    }
    const std::string& path() const { return path_; }

private:
    const uint8_t* p_;
    size_t size_;
    size_t pos_ = 0;
    std::string path_;
    uint64_t values_ = 0;
};

size_t scalar_size(GgufType t) {
    switch (t) {
        case GgufType::U8:
        case GgufType::I8:
        case GgufType::BOOL: return 1;
        case GgufType::U16:
        case GgufType::I16: return 2;
        case GgufType::U32:
        case GgufType::I32:
        case GgufType::F32: return 4;
        case GgufType::U64:
        case GgufType::I64:
        case GgufType::F64: return 8;
        case GgufType::STRING: return 8;  // at least its length field
        default: return 0;
    }
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, int depth) {
    GgufValue v{type, uint64_t(0)};
    switch (type) {
        case GgufType::U8: v.value = uint64_t(c.read<uint8_t>("a u8 value")); break;
        case GgufType::I8: v.value = int64_t(c.read<int8_t>("an i8 value")); break;
        case GgufType::U16: v.value = uint64_t(c.read<uint16_t>("a u16 value")); break;
        case GgufType::I16: v.value = int64_t(c.read<int16_t>("an i16 value")); break;
        case GgufType::U32: v.value = uint64_t(c.read<uint32_t>("a u32 value")); break;
        case GgufType::I32: v.value = int64_t(c.read<int32_t>("an i32 value")); break;
        case GgufType::F32: v.value = double(c.read<float>("an f32 value")); break;
        case GgufType::U64: v.value = c.read<uint64_t>("a u64 value"); break;
        case GgufType::I64: v.value = c.read<int64_t>("an i64 value"); break;
        case GgufType::F64: v.value = c.read<double>("an f64 value"); break;
        case GgufType::BOOL: {
            const uint8_t b = c.read<uint8_t>("a bool value");
            if (b > 1) c.fail("metadata key " + key + ": bool value " + std::to_string(b) + " is not 0 or 1");
            v.value = b == 1;
            break;
        }
        case GgufType::STRING: v.value = c.read_string("a string value"); break;
        case GgufType::ARRAY: {
            if (depth >= kMaxArrayDepth) c.fail("metadata key " + key + ": arrays nested deeper than 8");
            const uint32_t et = c.read<uint32_t>("an array element type");
            const uint64_t n = c.read<uint64_t>("an array length");
            const size_t min_size = scalar_size(GgufType(et));
            if (et > uint32_t(GgufType::F64))
                c.fail("metadata key " + key + ": unknown array element type " + std::to_string(et));
            // Every element takes at least min_size bytes (an empty nested array 12): a count the
            // rest of the file cannot hold is refused before anything is allocated.
            const uint64_t floor = GgufType(et) == GgufType::ARRAY ? 12 : min_size;
            if (n > c.remaining() / floor)
                c.fail("metadata key " + key + ": array of " + std::to_string(n) + " elements does not fit in the " +
                       std::to_string(c.remaining()) + " bytes that remain");
            c.count_values(n, key);  // before anything is allocated
            GgufArray arr{GgufType(et), {}};
            arr.items.reserve(size_t(n));
            for (uint64_t i = 0; i < n; ++i) arr.items.push_back(read_value(c, GgufType(et), key, depth + 1));
            v.value = std::move(arr);
            break;
        }
        default: c.fail("metadata key " + key + ": unknown value type " + std::to_string(uint32_t(type)));
    }
    return v;
}

// One tensor info: name, dimensions, type and data offset, checked against the alignment.
TensorInfo read_tensor_info(Cursor& c, uint64_t i, uint64_t alignment, const std::string& path, uint64_t* offset) {
    TensorInfo t;
    t.name = c.read_string("a tensor name");
    if (t.name.empty() || !is_valid_utf8(t.name))
        c.fail("tensor #" + std::to_string(i) + " has an empty or non-UTF-8 name");
    const uint32_t n_dims = c.read<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
        c.fail("tensor " + t.name + ": " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    std::vector<uint64_t> ne(n_dims);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        ne[d] = c.read<uint64_t>("a tensor dimension");
        if (ne[d] == 0) c.fail("tensor " + t.name + ": dimension " + std::to_string(d) + " is 0");
        if (ne[d] > INT64_MAX / n) c.fail("tensor " + t.name + ": element count overflows 64 bits");
        n *= ne[d];
    }
    const uint32_t type_id = c.read<uint32_t>("a tensor type");
    t.type = find_ggml_type(type_id);
    if (!t.type) c.fail("tensor " + t.name + ": unknown ggml type id " + std::to_string(type_id));
    if (ne[0] % t.type->block_size != 0)
        c.fail("tensor " + t.name + ": row of " + std::to_string(ne[0]) + " elements is not a whole number of " +
               t.type->name + " blocks (" + std::to_string(t.type->block_size) + ")");
    *offset = c.read<uint64_t>("a tensor offset");
    if (*offset % alignment != 0)
        c.fail("tensor " + t.name + ": offset " + std::to_string(*offset) + " is not a multiple of the alignment " +
               std::to_string(alignment));
    t.shape.assign(ne.rbegin(), ne.rend());
    t.n_elements = n;
    t.bytes = tensor_bytes(*t.type, n, t.name);
    t.file = path;
    return t;
}

// general.alignment, checked: a power of two up to 1 MiB (default 32).
uint64_t read_alignment(const Cursor& c, const GgufValue* a) {
    if (!a) return 32;
    if (!a->is_integer()) c.fail("general.alignment must be an integer");
    const int64_t align = a->as_int("general.alignment");
    if (align <= 0 || uint64_t(align) > kMaxAlignment || (align & (align - 1)) != 0)
        c.fail("general.alignment " + std::to_string(align) + " is not a power of two up to 1 MiB");
    return uint64_t(align);
}

// Whether the declared general.alignment is the one the file was written with: the padding
// before the data section is zeros, and the data section ends with the last tensor (padded to
// the alignment, as llama.cpp and gguf-py write it). A wrong alignment moves the data section,
// and every tensor would be read from the wrong bytes.
void check_layout(const MappedFile& file, uint64_t infos_end, uint64_t data_start, uint64_t data_end,
                  uint64_t alignment) {
    const std::string hint = ": does general.alignment " + std::to_string(alignment) + " match the file's padding?";
    for (uint64_t p = infos_end; p < data_start && p < file.size(); ++p)
        if (file.data()[p] != 0)
            throw Error(file.path() + ": the padding before the tensor data holds non-zero bytes" + hint);
    const uint64_t size = file.size() - data_start;
    const uint64_t padded = (data_end + alignment - 1) / alignment * alignment;
    if (size != data_end && size != padded)
        throw Error(file.path() + ": the last tensor ends " + std::to_string(size - data_end) +
                    " bytes before the end of the file" + hint);
}

// Points each tensor at its bytes in the data section, refusing one that runs past the end of
// the file or overlaps another. `offsets[i]` is tensor i's offset in the data section. Returns
// where the last tensor ends.
uint64_t place_tensors(std::vector<TensorInfo>& tensors, const std::vector<uint64_t>& offsets, const MappedFile& file,
                       uint64_t data_start) {
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
    uint64_t previous_end = 0;
    std::string previous_name;
    for (size_t i : order) {
        TensorInfo& t = tensors[i];
        const uint64_t available = file.size() - data_start;
        if (offsets[i] > available || t.bytes > available - offsets[i])
            throw Error(file.path() + ": tensor " + t.name + " (" + std::to_string(t.bytes) + " bytes at data offset " +
                        std::to_string(offsets[i]) + ") extends past the end of the file; is the file truncated?");
        if (offsets[i] < previous_end)
            throw Error(file.path() + ": tensors " + previous_name + " and " + t.name + " overlap");
        previous_end = offsets[i] + t.bytes;
        previous_name = t.name;
        t.data = file.data() + data_start + offsets[i];
    }
    return previous_end;
}

}  // namespace

std::shared_ptr<GgufFile> GgufFile::open(std::shared_ptr<MappedFile> file) {
    auto g = std::make_shared<GgufFile>();
    g->file_ = file;
    Cursor c(*file);
    c.read<uint32_t>("the magic");
    if (std::memcmp(file->data(), "GGUF", 4) != 0) c.fail("bad magic: not a GGUF file");
    g->version_ = c.read<uint32_t>("the version");
    if (g->version_ == 1) c.fail("GGUF version 1 is obsolete (32-bit counts); re-convert the model");
    if (g->version_ > 0xFFFF) c.fail("version " + std::to_string(g->version_) + ": big-endian GGUF is not supported");
    if (g->version_ != 2 && g->version_ != 3) c.fail("unsupported GGUF version " + std::to_string(g->version_));
    const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
    const uint64_t n_kv = c.read<uint64_t>("the metadata count");
    // A key is at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 8 + 4 + 8.
    if (n_kv > c.remaining() / 13) c.fail("metadata count " + std::to_string(n_kv) + " is larger than the file");
    if (n_tensors > c.remaining() / 32)
        c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file");

    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key = c.read_string("a metadata key");
        if (key.empty()) c.fail("empty metadata key");
        if (!is_valid_utf8(key)) c.fail("metadata key #" + std::to_string(i) + " is not valid UTF-8");
        if (g->index_.count(key)) c.fail("duplicate metadata key " + key);
        const uint32_t type = c.read<uint32_t>("a metadata value type");
        GgufValue v = read_value(c, GgufType(type), key, 0);
        g->index_[key] = g->metadata_.size();
        g->metadata_.emplace_back(std::move(key), std::move(v));
    }
    g->alignment_ = read_alignment(c, g->find("general.alignment"));

    std::vector<uint64_t> offsets(n_tensors, 0);
    std::set<std::string> names;
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t = read_tensor_info(c, i, g->alignment_, file->path(), &offsets[size_t(i)]);
        if (!names.insert(t.name).second) c.fail("duplicate tensor " + t.name);
        g->tensors_.push_back(std::move(t));
    }
    const uint64_t data_start = (c.pos() + g->alignment_ - 1) / g->alignment_ * g->alignment_;
    if (n_tensors > 0 && data_start > file->size()) c.fail("the tensor data section starts past the end of the file");
    g->data_offset_ = size_t(data_start);
    const uint64_t data_end = place_tensors(g->tensors_, offsets, *file, data_start);
    if (n_tensors > 0) check_layout(*file, c.pos(), data_start, data_end, g->alignment_);
    return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &metadata_[it->second].second;
}

}  // namespace akunu
