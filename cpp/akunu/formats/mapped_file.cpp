// mmap-based MappedFile.
#include "akunu/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "akunu/core/error.h"

namespace akunu {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error("'" + path + "' is not a regular file");
    }
    std::shared_ptr<MappedFile> f(new MappedFile());
    f->path_ = path;
    f->size_ = size_t(st.st_size);
    if (f->size_ > 0) {
        void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw Error("cannot map '" + path + "': " + std::strerror(err));
        }
        f->data_ = static_cast<const uint8_t*>(p);
        f->mapped_ = true;
    }
    ::close(fd);  // the mapping stays valid without the descriptor
    return f;
}

std::shared_ptr<MappedFile> MappedFile::from_bytes(const void* bytes, size_t size, const std::string& name) {
    std::shared_ptr<MappedFile> f(new MappedFile());
    f->path_ = name;
    f->size_ = size;
    f->owned_.reset(new uint8_t[size ? size : 1]);
    if (size) std::memcpy(f->owned_.get(), bytes, size);
    f->data_ = f->owned_.get();
    return f;
}

MappedFile::~MappedFile() {
    if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace akunu
