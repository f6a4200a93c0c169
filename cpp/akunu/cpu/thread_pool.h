// ThreadPool: the CPU backend's persistent workers, made once per Device and sized to the cores.
//
// run(total, fn, ctx) cuts [0, total) into a few chunks per thread that the calling thread and
// the workers claim from one atomic counter, and returns when every chunk is done. Claiming
// (rather than fixed ranges) keeps a shared machine fast: a worker the OS has not scheduled
// yet simply claims nothing, and the others take its share. Workers spin briefly between jobs
// (a decode step issues hundreds of short ones back to back) and then sleep. Nothing is
// allocated per job: the job is a plain function pointer and a context pointer.
//
// run() may be called from several threads (two models, or a model and its fork, share their
// device's pool): callers take turns, one job at a time, so that jobs never mix.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace akunu::cpu {

class ThreadPool {
public:
    using Fn = void (*)(void* ctx, size_t begin, size_t end);

    // Workers wait for a job spinning `spin_us` microseconds, then sleep until one comes.
    explicit ThreadPool(unsigned threads, int spin_us = 100);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return unsigned(workers_.size()) + 1; }
    // Runs fn over [0, total) split among the threads; `min_per_chunk` keeps tiny jobs in fewer
    // pieces (waking a worker costs more than a few microseconds of work).
    void run(size_t total, Fn fn, void* ctx, size_t min_per_chunk = 1);

private:
    void worker();
    // Claims and runs chunks of job `gen` until none is left.
    void work(uint32_t gen);

    std::chrono::microseconds spin_;
    std::vector<std::thread> workers_;
    // The current job. state_ holds (job number << 32 | next chunk); publishing a job stores it.
    std::atomic<Fn> fn_{nullptr};
    std::atomic<void*> ctx_{nullptr};
    std::atomic<size_t> total_{0};
    std::atomic<uint32_t> chunks_{0};
    std::atomic<uint64_t> state_{0};
    std::atomic<unsigned> busy_{0};  // workers inside work()
    std::atomic<unsigned> sleepers_{0};
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::mutex caller_;  // held by the thread whose job the workers run
};

}  // namespace akunu::cpu
