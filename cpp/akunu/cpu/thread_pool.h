// ThreadPool: the CPU backend's persistent workers, made once per Device and sized to the cores.
//
// run(total, fn, ctx) splits [0, total) into one contiguous range per thread (the calling
// thread takes the first) and returns when every range is done. Workers spin briefly between
// jobs (a decode step issues hundreds of short ones back to back) and then sleep. Nothing is
// allocated per job: the job is a plain function pointer and a context pointer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace akunu::cpu {

class ThreadPool {
public:
    using Fn = void (*)(void* ctx, size_t begin, size_t end);

    explicit ThreadPool(unsigned threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return unsigned(workers_.size()) + 1; }
    // Runs fn over [0, total) split among the threads; `min_per_thread` keeps tiny jobs on fewer
    // threads (waking a worker costs more than a few microseconds of work).
    void run(size_t total, Fn fn, void* ctx, size_t min_per_thread = 1);

private:
    void worker(unsigned index);
    void range(unsigned index, unsigned parts, size_t* begin, size_t* end) const;

    std::vector<std::thread> workers_;
    // The current job, published by bumping generation_.
    Fn fn_ = nullptr;
    void* ctx_ = nullptr;
    size_t total_ = 0;
    unsigned parts_ = 1;
    std::atomic<uint64_t> generation_{0};
    std::atomic<unsigned> pending_{0};
    std::atomic<unsigned> sleepers_{0};
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
};

}  // namespace akunu::cpu
