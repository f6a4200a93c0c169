// CommandList's hazard tracking and replay: barriers only between dependent dispatches (row
// windows and column views that never meet share an interval), commands that wait for the one
// before them, replays of one recording, and timestamps.
#include <cmath>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/vulkan/command_list.h"
#include "kernel_buffers.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {

using KernelTest = VkTest;

// Column views (Binding::columns) of one [rows, q | k | v] buffer: writers of columns that do
// not meet share a barrier interval, as a chunk's Q, K and V GEMMs do; a writer of columns that
// meet, or of the whole buffer, waits. Each column gets its own sum, written over poison, so a
// column written by the wrong dispatch, or not at all, fails.
TEST_F(KernelTest, ColumnViewsWithDisjointColumnsNeedNoBarrier) {
    auto dev = device();
    const size_t rows = 7, widths[3] = {16, 8, 8}, firsts[3] = {0, 16, 24}, row = 32;
    Buffer y = poisoned(dev, rows * row, DType::kF32);
    std::vector<Buffer> a, b;
    for (int i = 0; i < 3; ++i) {
        const std::vector<float> ones(rows * row, float(i + 1)), tens(rows * row, 10.0f * float(i + 1));
        a.push_back(dev->allocate(ones.data(), ones.size() * 4));
        b.push_back(dev->allocate(tens.data(), tens.size() * 4));
    }
    auto view = [&](int i) { return Binding::columns(y, firsts[i] * 4, widths[i] * 4, row * 4); };
    CommandList cl(dev);
    cl.begin();
    for (int i = 0; i < 3; ++i)
        kernels::add_rows(cl, a[size_t(i)], b[size_t(i)], view(i), DType::kF32, {widths[i], rows, row, row, row});
    EXPECT_EQ(cl.barrier_count(), 0u);
    // Columns 8..23 meet the first two views: a barrier.
    kernels::add_rows(cl, a[0], b[0], Binding::columns(y, 8 * 4, 16 * 4, row * 4), DType::kF32, {16, 1, row, row, row});
    EXPECT_EQ(cl.barrier_count(), 1u);
    kernels::add_rows(cl, a[2], b[2], view(2), DType::kF32,
                      {widths[2], rows, row, row, row});  // apart from 8..23: none
    EXPECT_EQ(cl.barrier_count(), 1u);
    kernels::fill(cl, y, DType::kF32, 1, 0.0f);  // the plain range meets every column
    EXPECT_EQ(cl.barrier_count(), 2u);
    cl.end();
    cl.submit_and_wait();
    const std::vector<float> got = download(y, rows * row, DType::kF32);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < row; ++c) {
            const float want = r == 0 && c == 0             ? 0.0f
                               : r == 0 && c >= 8 && c < 24 ? 11.0f
                               : c < 16                     ? 11.0f
                               : c < 24                     ? 22.0f
                                                            : 33.0f;
            ASSERT_EQ(got[r * row + c], want) << r << ", " << c;
        }

    // Columns that run past the row are refused, not tracked wrongly.
    cl.begin();
    EXPECT_THROW(kernels::add_rows(cl, a[0], b[0], Binding::columns(y, 24 * 4, 16 * 4, row * 4), DType::kF32,
                                   {16, 1, row, row, row}),
                 Error);
}

TEST_F(KernelTest, BarriersOnlyBetweenDependentDispatches) {
    auto dev = device();
    const size_t n = 1000;
    Buffer a = dev->allocate(n * 4), b = dev->allocate(n * 4), c = dev->allocate(n * 4), d = dev->allocate(n * 4);
    CommandList cl(dev);
    cl.begin();
    kernels::fill(cl, a, DType::kF32, n, 1.0f);
    kernels::fill(cl, b, DType::kF32, n, 2.0f);  // independent of the first: no barrier
    EXPECT_EQ(cl.barrier_count(), 0u);
    kernels::add(cl, a, b, c, DType::kF32, n);  // reads a and b: barrier
    EXPECT_EQ(cl.barrier_count(), 1u);
    kernels::fill(cl, d, DType::kF32, n, 3.0f);  // independent: none
    EXPECT_EQ(cl.barrier_count(), 1u);
    kernels::add(cl, c, d, a, DType::kF32, n);  // reads c, d; overwrites a (read earlier): barrier
    EXPECT_EQ(cl.barrier_count(), 2u);
    cl.end();
    cl.submit_and_wait();
    std::vector<float> got(n);
    a.read(got.data(), n * 4);
    for (float v : got) ASSERT_EQ(v, 6.0f);
}

// A command that waits for the previous one itself (DispatchCmd::awaits_previous, a GEMV
// hand-off) skips the barrier for what that one wrote, and only that: writes of earlier
// commands since the last barrier still need one.
TEST_F(KernelTest, AwaitingCommandsSkipOnlyThePreviousCommandsBarrier) {
    auto dev = device();
    const size_t n = 1000;
    Buffer a = dev->allocate(n * 4), b = dev->allocate(n * 4), c = dev->allocate(n * 4), d = dev->allocate(n * 4);
    DispatchTable t(*dev);
    kernels::fill(t, a, DType::kF32, n, 1.0f);
    kernels::add(t, a, a, c, DType::kF32, n);  // reads what the fill before wrote
    kernels::fill(t, b, DType::kF32, n, 2.0f);
    kernels::add(t, a, b, d, DType::kF32, n);  // reads b (the previous command's) and a (earlier)
    std::vector<DispatchCmd> cmds = t.commands();
    ASSERT_EQ(cmds.size(), 4u);
    CommandList cl(dev);
    cl.begin();
    cl.dispatch(cmds[0]);
    cmds[1].awaits_previous = true;
    cl.dispatch(cmds[1]);
    EXPECT_EQ(cl.barrier_count(), 0u);
    cl.dispatch(cmds[2]);
    cmds[3].awaits_previous = true;
    cl.dispatch(cmds[3]);  // a was written before the previous command: a barrier all the same
    EXPECT_EQ(cl.barrier_count(), 1u);
    cl.end();
}

TEST_F(KernelTest, ReplaysARecordedList) {
    auto dev = device();
    const size_t n = 300;
    Buffer acc = dev->allocate(n * 4), one = dev->allocate(n * 4);
    CommandList init(dev);
    init.begin();
    kernels::fill(init, acc, DType::kF32, n, 0.0f);
    kernels::fill(init, one, DType::kF32, n, 1.0f);
    init.end();
    init.submit_and_wait();
    CommandList step(dev);
    step.begin();
    kernels::add(step, acc, one, acc, DType::kF32, n);  // in place: a read and a write of acc
    step.end();
    const uint64_t allocations = dev->allocations_total();
    for (int i = 0; i < 5; ++i) step.submit_and_wait();
    EXPECT_EQ(dev->allocations_total(), allocations) << "replay must not allocate";
    std::vector<float> got(n);
    acc.read(got.data(), n * 4);
    for (float v : got) ASSERT_EQ(v, 5.0f);
}

TEST_F(KernelTest, TimestampsMeasureElapsedTime) {
    auto dev = device();
    if (!dev->profile().timestamps) GTEST_SKIP() << "the compute queue of this device has no timestamps";
    Buffer out = dev->allocate(1 << 20);
    CommandList cl(dev);
    cl.begin();
    int t0 = cl.timestamp();
    kernels::fill(cl, out, DType::kF32, (1 << 20) / 4, 2.0f);
    int t1 = cl.timestamp();
    cl.end();
    cl.submit_and_wait();
    const double ms = cl.elapsed_ms(t0, t1);
    EXPECT_GE(ms, 0.0);
    EXPECT_LT(ms, 10000.0);
}

}  // namespace akunu::test
