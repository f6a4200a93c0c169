// MappedFile: a read-only memory map of a whole file (RAII). Model readers parse headers from
// it and hand out pointers into it, so opening a model reads only what it touches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace akunu {

class MappedFile {
public:
    // Throws akunu::Error naming the path when it cannot be opened or mapped.
    static std::shared_ptr<MappedFile> open(const std::string& path);
    // A copy of `bytes` held in memory, for parsing buffers that are not files (fuzzers, tests).
    static std::shared_ptr<MappedFile> from_bytes(const void* bytes, size_t size, const std::string& name);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    MappedFile() = default;
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;  // false: data_ points into owned_
    std::unique_ptr<uint8_t[]> owned_;
};

}  // namespace akunu
