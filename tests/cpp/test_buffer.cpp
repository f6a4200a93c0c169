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

// Reads and writes of a buffer the host cannot map go through the device's staging area in
// pieces of at most its size (here 3 KiB, tuning staging_kib): one piece, exactly k pieces, k
// pieces and a remainder, at odd offsets, each byte where it belongs, and no transfer of any
// size allocates once the area exists. Owners grow the area; it never shrinks.
TEST_F(BufferTest, StagedTransfersOfAnySizeGoThroughTheStagingAreaInPieces) {
    if (device()->is_cpu()) GTEST_SKIP() << "the CPU backend's buffers are all host memory: nothing is staged";
    auto dev = Device::create(test_selector(), "staging_kib=3");
    EXPECT_EQ(dev->staging_bytes(), 0u);
    const size_t area = 3 * 1024, size = 5 * area + 2 * 333;
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; ++i) data[i] = uint8_t(i * 131 + (i >> 8));
    Buffer b = Buffer::allocate(dev, size, Residency::kDeviceOnly);
    ASSERT_FALSE(b.host_visible());
    b.write(data.data(), 1);  // the first staged transfer makes the area
    EXPECT_EQ(dev->staging_bytes(), area);
    const uint64_t total0 = dev->allocations_total();
    const int64_t live0 = dev->live_buffers();
    b.write(data.data(), size);  // 5 pieces and a remainder
    for (size_t bytes : {size_t(1), size_t(7), area - 1, area, area + 1, 3 * area, 3 * area + 333, size - 333}) {
        const size_t offset = (size - bytes) / 2 + 1;  // odd for most sizes
        std::vector<uint8_t> back(bytes, 0xEE);
        b.read(back.data(), bytes, offset);
        EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin() + long(offset))) << bytes << " at " << offset;
        // Written back reversed at the same place, then read whole: nothing outside the range moved.
        std::vector<uint8_t> reversed(data.begin() + long(offset), data.begin() + long(offset + bytes));
        std::reverse(reversed.begin(), reversed.end());
        b.write(reversed.data(), bytes, offset);
        std::vector<uint8_t> want = data, whole(size, 0xEE);
        std::copy(reversed.begin(), reversed.end(), want.begin() + long(offset));
        b.read(whole.data(), size);
        EXPECT_EQ(whole, want) << bytes << " at " << offset;
        b.write(data.data(), size);
    }
    EXPECT_EQ(dev->allocations_total(), total0) << "staged transfers of any size must not allocate";
    EXPECT_EQ(dev->live_buffers(), live0);
    EXPECT_EQ(dev->staging_bytes(), area);
    dev->reserve_staging(10);  // smaller than the area: nothing changes
    EXPECT_EQ(dev->staging_bytes(), area);
    dev->reserve_staging(area + 5);  // an owner's larger row: the area grows to it, once
    EXPECT_EQ(dev->staging_bytes(), area + 5);
    EXPECT_EQ(dev->allocations_total(), total0 + 1);
    EXPECT_EQ(dev->live_buffers(), live0);
    std::vector<uint8_t> whole(size, 0xEE);
    b.read(whole.data(), size);
    EXPECT_EQ(whole, data);
}

// tuning mapped_memory=0 leaves device-local buffers unmapped where the device could map them,
// so that tests take the staging path; host memory stays mapped.
TEST_F(BufferTest, UnmappedMemoryByTuning) {
    if (device()->is_cpu()) GTEST_SKIP() << "the CPU backend's buffers are all host memory";
    auto dev = Device::create(test_selector(), "mapped_memory=0");
    EXPECT_FALSE(Buffer::allocate(dev, 64).host_visible());
    EXPECT_TRUE(Buffer::allocate(dev, 64, Residency::kHost).host_visible());
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
