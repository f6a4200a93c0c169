// ByteReader: a bounds-checked little-endian cursor over a mapped file, for the binary model
// formats whose headers are read field by field (CTranslate2's model.bin, whisper.cpp's GGML).
// Every read past the end throws akunu::Error naming the file, the field and the offset.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "akunu/core/error.h"
#include "akunu/formats/mapped_file.h"

namespace akunu {

class ByteReader {
public:
    ByteReader(const MappedFile& f, std::string kind) : f_(f), kind_(std::move(kind)) {}

    size_t offset() const { return pos_; }
    size_t left() const { return f_.size() - pos_; }
    bool at_end() const { return pos_ == f_.size(); }

    // A pointer to the next n bytes, which the cursor then skips.
    const uint8_t* take(uint64_t n, const std::string& what) {
        if (n > left())
            fail(what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) + ", the file has " +
                 std::to_string(left()) + " left; is it truncated?");
        const uint8_t* p = f_.data() + pos_;
        pos_ += size_t(n);
        return p;
    }
    template <typename T>
    T read(const std::string& what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }
    std::string bytes(uint64_t n, const std::string& what) {
        const uint8_t* p = take(n, what);
        return std::string(reinterpret_cast<const char*>(p), size_t(n));
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(f_.path() + ": malformed " + kind_ + ": " + what);
    }

private:
    const MappedFile& f_;
    std::string kind_;
    size_t pos_ = 0;
};

}  // namespace akunu
