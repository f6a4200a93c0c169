// Command replay on the thread pool.
#include "akunu/cpu/cpu_replay.h"

#include <chrono>
#include <cstdint>
#include <cstring>

namespace akunu::cpu {

namespace {

constexpr size_t kCopyBlock = 1 << 16;  // bytes per copy "workgroup"

void copy_bytes(const CpuArgs& a, size_t begin, size_t end) {
    const size_t b0 = begin * kCopyBlock, b1 = std::min(end * kCopyBlock, a.bytes[0]);
    if (b1 > b0) std::memmove(a.b[1] + b0, a.b[0] + b0, b1 - b0);
}

void write_time(const CpuArgs& a, size_t, size_t) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    *a.at<uint64_t>(0) = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

void run_range(void* ctx, size_t begin, size_t end) {
    const CpuCommand& c = *static_cast<const CpuCommand*>(ctx);
    c.fn(c.args, begin, end);
}

// An indirect dispatch takes the counts written for this run.
void read_counts(CpuCommand& c) {
    for (int i = 0; i < 3; ++i) c.args.groups[i] = c.counts[i];
    c.groups = size_t(c.counts[0]) * c.counts[1] * c.counts[2];
}

}  // namespace

CpuCommand copy_command(uint8_t* src, uint8_t* dst, size_t bytes) {
    CpuCommand c;
    c.fn = copy_bytes;
    c.args.b[0] = src;
    c.args.b[1] = dst;
    c.args.bytes[0] = c.args.bytes[1] = bytes;
    c.groups = (bytes + kCopyBlock - 1) / kCopyBlock;
    c.min_groups_per_thread = 4;
    return c;
}

CpuCommand timestamp_command(uint64_t* slot) {
    CpuCommand c;
    c.fn = write_time;
    c.args.b[0] = reinterpret_cast<uint8_t*>(slot);
    c.args.bytes[0] = sizeof(uint64_t);
    c.min_groups_per_thread = 2;  // one group: runs on the calling thread
    return c;
}

void replay(ThreadPool& pool, std::vector<CpuCommand>& commands, double inline_us) {
    using Clock = std::chrono::steady_clock;
    for (CpuCommand& c : commands) {
        if (c.counts) read_counts(c);
        if (c.groups == 0) continue;
        if (inline_us <= 0.0) {
            pool.run(c.groups, run_range, &c, c.min_groups_per_thread);
            continue;
        }
        // A command's first run is shared: a list recorded for one submission (a profile's, a
        // kernel test's) then runs as a replayed step does, not every command on this thread.
        const bool here = c.work_us > 0.0f && c.work_us < inline_us;
        const Clock::time_point start = Clock::now();
        pool.run(c.groups, run_range, &c, here ? SIZE_MAX : c.min_groups_per_thread);  // SIZE_MAX: one chunk
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        c.work_us = float(here ? us : us * pool.size());
    }
}

// Auto: 10 us, measured on a quiet machine against the 100 us that suited a loaded one
// (bench/NOTES.md, "CPU backend: sharing short commands on a quiet machine").
double inline_us(const Tuning& tuning) { return tuning.cpu_inline_us >= 0 ? tuning.cpu_inline_us : 10.0; }

}  // namespace akunu::cpu
