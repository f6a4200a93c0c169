// CTranslate2 model.bin parsing (ct2_file.h gives the layout).
#include "akunu/formats/ct2_file.h"

#include "akunu/core/error.h"
#include "akunu/formats/byte_reader.h"

namespace akunu {

namespace {

constexpr uint8_t kMaxRank = 8;

// CTranslate2's dtype codes, in the order of its DataType enum.
const TensorType kDTypes[] = {TensorType::F32, TensorType::I8,  TensorType::I16,
                              TensorType::I32, TensorType::F16, TensorType::BF16};

std::string read_string(ByteReader& r, const std::string& what) {
    const uint16_t n = r.read<uint16_t>(what + " length");
    if (n == 0) r.fail(what + " has length 0 (the length counts a trailing NUL)");
    std::string s = r.bytes(n, what);
    if (s.back() != '\0') r.fail(what + " does not end with NUL");
    s.pop_back();
    return s;
}

TensorInfo read_variable(ByteReader& r, const std::string& path) {
    TensorInfo t;
    t.name = read_string(r, "a variable name");
    t.file = path;
    const uint8_t rank = r.read<uint8_t>("the rank of " + t.name);
    if (rank > kMaxRank)
        r.fail("variable " + t.name + " has rank " + std::to_string(rank) + ", at most " + std::to_string(kMaxRank));
    uint64_t n = 1;
    for (uint8_t i = 0; i < rank; ++i) {
        const uint32_t d = r.read<uint32_t>("a dimension of " + t.name);
        if (d == 0) r.fail("variable " + t.name + ": dimension " + std::to_string(i) + " is 0");
        n *= d;  // at most 8 factors below 2^32 each would overflow; checked against the bytes below
        if (n > (uint64_t(1) << 48)) r.fail("variable " + t.name + ": element count exceeds 2^48");
        t.shape.push_back(d);
    }
    const uint8_t dtype = r.read<uint8_t>("the dtype of " + t.name);
    if (dtype >= std::size(kDTypes))
        r.fail("variable " + t.name + " has unknown dtype " + std::to_string(dtype) +
               " (CTranslate2's 0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16)");
    t.type = &type_traits(kDTypes[dtype]);
    t.n_elements = n;
    const uint32_t bytes = r.read<uint32_t>("the byte count of " + t.name);
    if (uint64_t(bytes) != n * t.type->block_bytes)
        r.fail("variable " + t.name + ": shape " + shape_string(t.shape) + " of " + t.type->name + " needs " +
               std::to_string(n * t.type->block_bytes) + " bytes, the file gives " + std::to_string(bytes));
    t.bytes = bytes;
    t.data = r.take(bytes, "the data of " + t.name);
    return t;
}

}  // namespace

std::shared_ptr<Ct2File> Ct2File::open(std::shared_ptr<MappedFile> file) {
    auto c = std::shared_ptr<Ct2File>(new Ct2File());
    c->file_ = file;
    ByteReader r(*file, "CTranslate2 model.bin");
    const uint32_t version = r.read<uint32_t>("the binary version");
    if (version != kVersion)
        r.fail("binary version " + std::to_string(version) + ", akunu reads version " + std::to_string(kVersion) +
               " (CTranslate2 3.x and 4.x)");
    c->spec_ = read_string(r, "the spec name");
    r.read<uint32_t>("the spec revision");
    const uint32_t count = r.read<uint32_t>("the variable count");
    for (uint32_t i = 0; i < count; ++i) {
        TensorInfo t = read_variable(r, file->path());
        if (c->index_.count(t.name)) r.fail("duplicate variable " + t.name);
        c->index_[t.name] = c->variables_.size();
        c->variables_.push_back(std::move(t));
    }
    const uint32_t aliases = r.read<uint32_t>("the alias count");
    for (uint32_t i = 0; i < aliases; ++i) {
        const std::string alias = read_string(r, "an alias name");
        const std::string target = read_string(r, "the target of alias " + alias);
        if (!c->index_.count(target)) r.fail("alias " + alias + " names " + target + ", which is not a variable");
        c->aliases_[alias] = target;
    }
    if (!r.at_end()) r.fail(std::to_string(r.left()) + " bytes follow the aliases");
    return c;
}

const TensorInfo* Ct2File::find(const std::string& name) const {
    auto a = aliases_.find(name);
    auto it = index_.find(a == aliases_.end() ? name : a->second);
    return it == index_.end() ? nullptr : &variables_[it->second];
}

int64_t Ct2File::scalar(const std::string& name) const {
    const TensorInfo* t = find(name);
    AKUNU_CHECK(t, file_->path() + ": variable " + name + " is missing");
    AKUNU_CHECK(t->n_elements == 1 && t->shape.empty(),
                file_->path() + ": variable " + name + " should be a scalar, found shape " + shape_string(t->shape));
    switch (t->type->type) {
        case TensorType::I8: return *reinterpret_cast<const int8_t*>(t->data);
        case TensorType::I16: {
            int16_t v;
            std::memcpy(&v, t->data, 2);
            return v;
        }
        case TensorType::I32: {
            int32_t v;
            std::memcpy(&v, t->data, 4);
            return v;
        }
        default: throw Error(file_->path() + ": variable " + name + " should be an integer, found " + t->type->name);
    }
}

}  // namespace akunu
