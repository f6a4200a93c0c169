// Safetensors reader, backed by a memory map: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the
// data. Every entry is checked: a known dtype, a shape whose size matches its byte range, a
// range inside the file, and no two tensors overlapping.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "akunu/formats/mapped_file.h"
#include "akunu/formats/tensor_info.h"

namespace akunu {

class SafetensorsFile {
public:
    static std::shared_ptr<SafetensorsFile> open(std::shared_ptr<MappedFile> file);

    const std::string& path() const { return file_->path(); }
    const MappedFile& file() const { return *file_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"

private:
    std::shared_ptr<MappedFile> file_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace akunu
