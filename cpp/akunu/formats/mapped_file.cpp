// mmap-based MappedFile, and the SIGBUS guard of copy_out.
#include "akunu/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csetjmp>
#include <csignal>
#include <cerrno>
#include <cstring>
#include <mutex>

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
    f->fd_ = fd;
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
    if (fd_ >= 0) ::close(fd_);
}

void MappedFile::check_intact() const {
    struct stat st;
    if (fd_ < 0 || (fstat(fd_, &st) == 0 && size_t(st.st_size) >= size_)) return;
    throw Error("'" + path_ + "' changed size after it was opened (" + std::to_string(size_) + " bytes, now " +
                std::to_string(st.st_size) +
                "): a model file must not be rewritten in place while it is open; open it again");
}

// ---- SIGBUS guard -------------------------------------------------------------------------------
// A thread inside guarded_copy points t_jump at its jump buffer; the handler jumps back there
// on SIGBUS. Any other SIGBUS goes to the handler that was installed before ours.

namespace {

thread_local sigjmp_buf* t_jump = nullptr;
struct sigaction g_previous;

void on_sigbus(int sig, siginfo_t* info, void* context) {
    if (sigjmp_buf* jump = t_jump) {
        t_jump = nullptr;
        siglongjmp(*jump, 1);
    }
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        return g_previous.sa_handler(sig);
    }
    signal(sig, SIG_DFL);  // the fault repeats on return and ends the process as it would have
}

// False when the copy faulted. Nothing here has a destructor for the jump to skip.
bool guarded_copy(void* dst, const void* src, size_t n) {
    static std::once_flag installed;
    std::call_once(installed, [] {
        struct sigaction sa = {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &g_previous);
    });
    sigjmp_buf jump;
    if (sigsetjmp(jump, 1) != 0) return false;
    t_jump = &jump;
    std::memcpy(dst, src, n);
    t_jump = nullptr;
    return true;
}

}  // namespace

void MappedFile::copy_out(const uint8_t* src, void* dst, size_t n) const {
    AKUNU_CHECK(src >= data_ && n <= size_ && size_t(src - data_) <= size_ - n,
                "copy_out: the range is not inside '" + path_ + "'");
    check_intact();
    if (!mapped_) {
        std::memcpy(dst, src, n);
        return;
    }
    if (!guarded_copy(dst, src, n))
        throw Error("'" + path_ +
                    "' was cut short while akunu read it: a model file must not be rewritten in "
                    "place while it is open; open it again");
}

}  // namespace akunu
