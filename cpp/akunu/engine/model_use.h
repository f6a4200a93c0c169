// ModelUse: one caller at a time per Model. A Model holds one KV cache, one set of scratch
// buffers and recorded command lists; two threads driving it at once would interleave their
// steps and both get wrong results. Every call that runs or changes the model enters a scope;
// a second thread that tries while one is inside gets an akunu::Error at once (the same thread
// may nest scopes). Separate Models and forks have their own ModelUse and run in parallel.
// uses() counts the outermost scopes entered, so a caller that pauses (a generate stream) can
// tell whether anyone else used the model in between.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "akunu/core/error.h"

namespace akunu {

class ModelUse {
public:
    class Scope {
    public:
        explicit Scope(ModelUse& u) : u_(u) {
            const std::thread::id me = std::this_thread::get_id();
            std::thread::id none;
            if (u_.owner_.load(std::memory_order_acquire) == me) {
                ++u_.depth_;
                return;
            }
            if (!u_.owner_.compare_exchange_strong(none, me, std::memory_order_acq_rel))
                throw Error(
                    "this Model is in use by another thread: a Model runs one call at a time (fork() gives each "
                    "thread its own model on the same weights)");
            u_.depth_ = 1;
            u_.uses_.fetch_add(1, std::memory_order_relaxed);
        }
        ~Scope() {
            if (--u_.depth_ == 0) u_.owner_.store(std::thread::id(), std::memory_order_release);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        ModelUse& u_;
    };

    uint64_t uses() const { return uses_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::thread::id> owner_{};
    int depth_ = 0;  // touched only by the owner
    std::atomic<uint64_t> uses_{0};
};

}  // namespace akunu
