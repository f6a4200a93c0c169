// Device enumeration, selection, profiles and the validation layer itself.
#include <cstdlib>

#include "akunu/core/error.h"
#include "vk_test.h"

namespace akunu::test {

using DeviceTest = VkTest;

TEST_F(DeviceTest, ListsDevicesInPreferenceOrder) {
    auto devices = list_devices();
    ASSERT_FALSE(devices.empty());
    for (size_t i = 0; i < devices.size(); ++i) {
        EXPECT_EQ(devices[i].index, int(i));
        const DeviceProfile& p = devices[i].profile;
        EXPECT_FALSE(p.name.empty());
        EXPECT_GE(p.subgroup_size, 1u);
        EXPECT_GE(p.shared_memory_bytes, 16u * 1024);
        EXPECT_FALSE(p.heaps.empty());
        EXPECT_GT(p.max_storage_buffer_range, 0u);
        EXPECT_GE(p.max_push_constants_bytes, 128u);
    }
    for (size_t i = 1; i < devices.size(); ++i)  // discrete < integrated < virtual < cpu
        EXPECT_LE(int(devices[i - 1].profile.type), int(devices[i].profile.type));
    // The Vulkan devices, then akunu's CPU backend.
    ASSERT_GE(devices.size(), 2u);
    for (size_t i = 0; i + 1 < devices.size(); ++i) EXPECT_EQ(devices[i].backend, Backend::kVulkan);
    EXPECT_EQ(devices.back().backend, Backend::kCpu);
    EXPECT_EQ(find_device("cpu").index, int(devices.size()) - 1);
    EXPECT_TRUE(Device::create(std::to_string(devices.size() - 1))->is_cpu());
    EXPECT_TRUE(Device::create(devices.back().profile.name)->is_cpu());
    EXPECT_FALSE(Device::create("vulkan")->is_cpu());
}

TEST_F(DeviceTest, DefaultIsAGpuElseTheCpuBackend) {
    // A Vulkan driver on the CPU (lavapipe) is never the default: the CPU backend runs faster.
    unsetenv("AKUNU_DEVICE");
    const auto devices = list_devices();
    const DeviceInfo chosen = find_device();
    const bool gpu = devices.front().backend == Backend::kVulkan && devices.front().profile.type != DeviceType::kCpu;
    EXPECT_EQ(chosen.index, gpu ? 0 : int(devices.size()) - 1) << chosen.reason;
    EXPECT_NE(chosen.reason.find("the default"), std::string::npos) << chosen.reason;
    EXPECT_EQ(Device::create()->is_cpu(), !gpu);
    EXPECT_EQ(device_kind(Backend::kCpu, devices.back().profile), "akunu CPU backend");
    EXPECT_NE(find_device("cpu").reason.find("device 'cpu'"), std::string::npos);
}

TEST_F(DeviceTest, ValidationLayerIsOnUnderCtest) {
    ASSERT_TRUE(validation_requested()) << "ctest sets AKUNU_VALIDATION=1";
    EXPECT_TRUE(Instance::get()->validation_enabled());
}

TEST_F(DeviceTest, ValidationLayerReportsMisuse) {
    // A buffer with no usage bits is invalid (VUID-VkBufferCreateInfo-usage-requiredbitmask):
    // the record must catch it, or a clean record would prove nothing.
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = 64;
    info.usage = 0;
    VkDevice vk = device()->handle();  // creates the instance, which resolves the entry points
    VkBuffer buffer = VK_NULL_HANDLE;
    vkCreateBuffer(vk, &info, nullptr, &buffer);
    if (buffer) vkDestroyBuffer(vk, buffer, nullptr);
    const auto messages = validation_messages();
    ASSERT_FALSE(messages.empty());
    EXPECT_NE(messages.front().find("usage-requiredbitmask"), std::string::npos) << messages.front();
    clear_validation_messages();
}

TEST_F(DeviceTest, SelectsByIndexAndByName) {
    auto first = list_devices().front().profile;
    auto by_index = Device::create("0");
    EXPECT_EQ(by_index->profile().name, first.name);
    // A case-changed substring of the name selects the same device.
    std::string part = first.name.substr(0, 4);
    for (auto& c : part) c = char(std::toupper(static_cast<unsigned char>(c)));
    auto by_name = Device::create(part);
    EXPECT_EQ(by_name->profile().name, first.name);
}

TEST_F(DeviceTest, UnknownSelectorListsTheDevices) {
    try {
        Device::create("no-such-gpu-xyz");
        FAIL() << "expected akunu::Error";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("matches no device"), std::string::npos) << what;
        EXPECT_NE(what.find(list_devices().front().profile.name), std::string::npos) << what;
        EXPECT_NE(what.find(list_devices().back().profile.name), std::string::npos) << what;
    }
    EXPECT_THROW(Device::create("999"), Error);
}

TEST_F(DeviceTest, AkunuDeviceEnvironmentVariable) {
    setenv("AKUNU_DEVICE", "definitely-not-a-device", 1);
    EXPECT_THROW(Device::create(), Error);
    setenv("AKUNU_DEVICE", "0", 1);
    EXPECT_NO_THROW(Device::create());
    unsetenv("AKUNU_DEVICE");
}

TEST_F(DeviceTest, ProfileDescribesMemoryAndFeatures) {
    const std::string text = device()->profile().describe();
    EXPECT_NE(text.find("subgroup size"), std::string::npos);
    EXPECT_NE(text.find("heap 0"), std::string::npos);
}

}  // namespace akunu::test
