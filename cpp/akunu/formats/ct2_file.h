// Ct2File: CTranslate2's model.bin (binary version 6), the format faster-whisper loads.
//
// Layout (little-endian): u32 version, string spec name, u32 revision, u32 variable count, then
// per variable a string name, u8 rank, u32 dims[rank], u8 dtype, u32 byte count and the data;
// then u32 alias count and (alias, target) string pairs. A string is a u16 length that counts
// a trailing NUL, then the bytes. Variables are views into the memory map; nothing is copied.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "akunu/formats/mapped_file.h"
#include "akunu/formats/tensor_info.h"

namespace akunu {

class Ct2File {
public:
    static constexpr uint32_t kVersion = 6;

    // Throws akunu::Error naming the file and the field for any malformed input.
    static std::shared_ptr<Ct2File> open(std::shared_ptr<MappedFile> file);

    const std::string& spec() const { return spec_; }  // "WhisperSpec"
    const std::vector<TensorInfo>& variables() const { return variables_; }
    // A variable by name, following aliases; null when absent.
    const TensorInfo* find(const std::string& name) const;
    // The value of an integer scalar variable (rank 0); throws when absent or not an integer.
    int64_t scalar(const std::string& name) const;
    const std::shared_ptr<MappedFile>& file() const { return file_; }

private:
    std::shared_ptr<MappedFile> file_;
    std::string spec_;
    std::vector<TensorInfo> variables_;
    std::map<std::string, size_t> index_;
    std::map<std::string, std::string> aliases_;  // alias -> target
};

}  // namespace akunu
