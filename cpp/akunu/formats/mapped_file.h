// MappedFile: a read-only memory map of a whole file (RAII). Model readers parse headers from
// it and hand out pointers into it, so opening a model reads only what it touches.
//
// A file that shrinks while it is mapped (truncated or rewritten in place) would make a read of
// its lost pages kill the process with SIGBUS. akunu keeps the file open and
// - checks its size before each read of tensor data (check_intact: the engine's weight upload),
// - copies what it hands out (copy_out: akunu.open()'s tensors are copies, never views of the
//   map) under a SIGBUS guard, so that even a file cut during the copy raises akunu::Error.
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

    // Throws akunu::Error when the file is now shorter than when it was mapped.
    void check_intact() const;
    // dst[0, n) = src[0, n) with src inside the map; a file cut before or during the copy
    // throws akunu::Error instead of raising SIGBUS.
    void copy_out(const uint8_t* src, void* dst, size_t n) const;

private:
    MappedFile() = default;
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;  // false: data_ points into owned_
    std::unique_ptr<uint8_t[]> owned_;
    int fd_ = -1;  // kept open for check_intact
};

}  // namespace akunu
