// Buffer allocation, host transfers (mapped and staged), accounting and bad sizes.
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
