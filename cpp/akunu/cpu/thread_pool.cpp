// ThreadPool: publication of a job, chunk claiming, the spin-then-sleep wait and the join.
#include "akunu/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace akunu::cpu {

// Pauses between two reads of the clock while a worker spins.
static constexpr int kPausesPerClockRead = 64;
// Chunks per thread: enough to even out threads that start late.
static constexpr size_t kChunksPerThread = 4;
// The chunk counter of a finished job: above any chunk count (run() caps them at 2^30).
static constexpr uint64_t kClosed = 0xFFFFFFFFu;

ThreadPool::ThreadPool(unsigned threads, int spin_us) : spin_(std::max(0, spin_us)) {
    for (unsigned i = 1; i < std::max(1u, threads); ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::work(uint32_t gen) {
    // The job's fields are read before claiming; a claim succeeds only while job `gen` is the
    // current one, so fields read for a newer job are never used.
    const Fn fn = fn_.load(std::memory_order_relaxed);
    void* ctx = ctx_.load(std::memory_order_relaxed);
    const size_t total = total_.load(std::memory_order_relaxed);
    const uint32_t chunks = chunks_.load(std::memory_order_relaxed);
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
        if (uint32_t(s >> 32) != gen || uint32_t(s) >= chunks) return;
        if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
        const size_t c = uint32_t(s);
        fn(ctx, total * c / chunks, total * (c + 1) / chunks);
        s = state_.load(std::memory_order_acquire);
    }
}

void ThreadPool::run(size_t total, Fn fn, void* ctx, size_t min_per_chunk) {
    if (total == 0) return;
    const size_t chunks = std::min<size_t>(
        {total / std::max<size_t>(1, min_per_chunk), size_t(size()) * kChunksPerThread, size_t(1) << 30});
    if (chunks <= 1 || workers_.empty()) {
        fn(ctx, 0, total);
        return;
    }
    std::lock_guard<std::mutex> turn(caller_);
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    total_.store(total, std::memory_order_relaxed);
    chunks_.store(uint32_t(chunks), std::memory_order_relaxed);
    const uint32_t gen = uint32_t(state_.load(std::memory_order_relaxed) >> 32) + 1;
    state_.store(uint64_t(gen) << 32, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(mutex_);  // a worker between its check and its wait holds this
        wake_.notify_all();
    }
    work(gen);
    // Every chunk is claimed; wait for the ones still running.
    for (int spins = 0; busy_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 1000)
            _mm_pause();
        else
            std::this_thread::yield();
    }
    // Close the job: no chunk of it is left to claim, whatever chunk count is read with it. A
    // worker that saw this job start but entered work() only now (the OS paused it in between)
    // may read the next job's fields, which the next run() stores before its state; against an
    // open state (gen, chunks claimed) the next job's larger chunk count let it claim and run a
    // chunk of that job before it was published, and the chunk then ran twice (a residual add
    // counted twice: logits off by a few percent, rarely, on a loaded machine).
    state_.store((uint64_t(gen) << 32) | kClosed, std::memory_order_release);
}

void ThreadPool::worker() {
    uint32_t seen = 0;
    for (;;) {
        // Spins by the clock: a pause lasts from a few to some 100 cycles, by processor.
        auto until = std::chrono::steady_clock::now() + spin_;
        int spins = 0;
        uint64_t s;
        while (uint32_t((s = state_.load(std::memory_order_acquire)) >> 32) == seen &&
               !stop_.load(std::memory_order_relaxed)) {
            if (++spins % kPausesPerClockRead != 0 || std::chrono::steady_clock::now() < until) {
                _mm_pause();
                continue;
            }
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            wake_.wait(lock,
                       [&] { return uint32_t(state_.load(std::memory_order_seq_cst) >> 32) != seen || stop_.load(); });
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
            until = std::chrono::steady_clock::now() + spin_;
        }
        if (stop_.load()) return;
        seen = uint32_t(s >> 32);
        busy_.fetch_add(1, std::memory_order_seq_cst);
        work(seen);
        busy_.fetch_sub(1, std::memory_order_release);
    }
}

}  // namespace akunu::cpu
