// Buffer allocation, host transfers (mapped and staged), accounting and bad sizes.
#include <algorithm>

#include "akunu/core/error.h"
#include "vk_test.h"

namespace akunu::test {

using BufferTest = VkTest;

TEST_F(BufferTest, RoundTripThroughMappedMemory) {
    auto data = random_floats(1001, 1);
    Buffer b = device()->allocate(data.data(), data.size() * 4);
    ASSERT_EQ(b.size(), data.size() * 4);
    std::vector<float> back(data.size(), kPoison);
    b.read(back.data(), back.size() * 4);
    EXPECT_EQ(back, data);
    if (b.host_visible()) EXPECT_EQ(static_cast<float*>(b.contents())[1000], data[1000]);
}

TEST_F(BufferTest, RoundTripThroughStaging) {
    auto data = random_floats(333, 2);
    Buffer b = Buffer::allocate(device(), 333 * 4, Residency::kDeviceOnly);
    EXPECT_FALSE(b.host_visible());
    EXPECT_EQ(b.contents(), nullptr);
    b.write(data.data(), 100 * 4);
    b.write(data.data() + 100, 233 * 4, 100 * 4);  // at an offset
    std::vector<float> back(333, kPoison);
    b.read(back.data(), 333 * 4);
    EXPECT_EQ(back, data);
    std::vector<float> tail(10, kPoison);
    b.read(tail.data(), 40, 323 * 4);
    EXPECT_EQ(tail, std::vector<float>(data.end() - 10, data.end()));
}

// Reads and writes of a buffer the host cannot map go through the device's staging area,
// planned once: repeated transfers allocate nothing. One larger than the area takes a staging
// buffer of its own, as before, and leaves the area as it was.
TEST_F(BufferTest, StagedTransfersReuseTheDevicesStagingArea) {
    auto dev = device();
    if (dev->is_cpu()) GTEST_SKIP() << "the CPU backend's buffers are all host memory: nothing is staged";
    dev->reserve_staging(600 * 4);
    const size_t area = dev->staging_bytes();  // more where a test before planned more
    ASSERT_GE(area, 600u * 4);
    const size_t n = area / 4 + 401;  // a whole read is larger than the area, pieces of 499 fit
    const auto data = random_floats(n, 7);
    Buffer b = Buffer::allocate(dev, n * 4, Residency::kDeviceOnly);
    ASSERT_FALSE(b.host_visible());
    dev->reserve_staging(10);  // smaller than the area: nothing changes
    EXPECT_EQ(dev->staging_bytes(), area);
    const uint64_t total0 = dev->allocations_total();
    for (size_t at = 0; at < n; at += 500) b.write(data.data() + at, std::min<size_t>(500, n - at) * 4, at * 4);
    std::vector<float> back(n, kPoison);
    for (int pass = 0; pass < 5; ++pass)
        for (size_t at = 0; at < n; at += 499) b.read(back.data() + at, std::min<size_t>(499, n - at) * 4, at * 4);
    EXPECT_EQ(back, data);
    EXPECT_EQ(dev->allocations_total(), total0) << "staged transfers within the area must not allocate";
    std::vector<float> whole(n, kPoison);
    b.read(whole.data(), n * 4);
    EXPECT_EQ(whole, data);
    EXPECT_EQ(dev->allocations_total(), total0 + 1);
    EXPECT_EQ(dev->staging_bytes(), area);
}

TEST_F(BufferTest, AccountingFollowsAllocationAndFree) {
    auto dev = device();
    const uint64_t bytes0 = dev->allocated_bytes();
    const int64_t live0 = dev->live_buffers();
    const uint64_t total0 = dev->allocations_total();
    {
        Buffer a = dev->allocate(4096);
        Buffer b = dev->allocate(12345);
        EXPECT_EQ(dev->live_buffers(), live0 + 2);
        EXPECT_GE(dev->allocated_bytes(), bytes0 + 4096 + 12345);
        Buffer moved = std::move(a);
        EXPECT_FALSE(a);
        EXPECT_TRUE(moved);
        EXPECT_EQ(dev->live_buffers(), live0 + 2);
        b.free();
        EXPECT_FALSE(b);
        EXPECT_EQ(dev->live_buffers(), live0 + 1);
    }
    EXPECT_EQ(dev->live_buffers(), live0);
    EXPECT_EQ(dev->allocated_bytes(), bytes0);
    EXPECT_EQ(dev->allocations_total(), total0 + 2);
}

TEST_F(BufferTest, RejectsZeroAndOversizedBuffers) {
    try {
        device()->allocate(0);
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("0 bytes"), std::string::npos);
    }
    try {
        device()->allocate(size_t(1) << 50);  // 1 PiB: over every heap
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("largest memory heap"), std::string::npos) << e.what();
    }
}

TEST_F(BufferTest, RejectsOutOfRangeTransfers) {
    Buffer b = device()->allocate(64);
    std::vector<char> tmp(128);
    EXPECT_THROW(b.write(tmp.data(), 65), Error);
    EXPECT_THROW(b.read(tmp.data(), 8, 60), Error);
    b.free();
    EXPECT_THROW(b.write(tmp.data(), 4), Error);
}

}  // namespace akunu::test
