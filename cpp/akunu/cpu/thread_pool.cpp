// ThreadPool: publication of a job, the spin-then-sleep wait and the join.
#include "akunu/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace akunu::cpu {

// Spins before sleeping: about 100 microseconds, longer than the gap between two kernels of a
// decode step, far shorter than the gap between two user calls.
static constexpr int kSpins = 20000;

ThreadPool::ThreadPool(unsigned threads) {
    for (unsigned i = 1; i < std::max(1u, threads); ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::range(unsigned index, unsigned parts, size_t* begin, size_t* end) const {
    *begin = total_ * index / parts;
    *end = total_ * (index + 1) / parts;
}

void ThreadPool::run(size_t total, Fn fn, void* ctx, size_t min_per_thread) {
    if (total == 0) return;
    const size_t useful = std::max<size_t>(1, total / std::max<size_t>(1, min_per_thread));
    const unsigned parts = unsigned(std::min<size_t>(size(), useful));
    if (parts == 1) {
        fn(ctx, 0, total);
        return;
    }
    fn_ = fn;
    ctx_ = ctx;
    total_ = total;
    parts_ = parts;
    pending_.store(unsigned(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(mutex_);  // a worker between its check and its wait holds this
        wake_.notify_all();
    }
    size_t b, e;
    range(0, parts, &b, &e);
    fn(ctx, b, e);
    while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
}

void ThreadPool::worker(unsigned index) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
            if (++spins < kSpins) {
                _mm_pause();
                continue;
            }
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen || stop_.load(); });
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        if (stop_.load()) return;
        seen = generation_.load(std::memory_order_acquire);
        if (index < parts_) {
            size_t b, e;
            range(index, parts_, &b, &e);
            if (b < e) fn_(ctx_, b, e);
        }
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace akunu::cpu
