// Device: where akunu's kernels run, with its profile, memory accounting and the pipelines made
// from the embedded kernels. Two backends sit behind it: a Vulkan logical device with a compute
// queue, or the native CPU backend (cpu/), whose buffers are host memory and whose pipelines
// resolve the same kernel names to C++ functions run on a thread pool.
//
// Devices are shared (std::shared_ptr): every Buffer and CommandList holds one, so a device
// lives until the last object made from it is gone.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "akunu/vulkan/device_profile.h"
#include "akunu/vulkan/instance.h"
#include "akunu/vulkan/memory.h"
#include "akunu/vulkan/pipeline.h"

namespace akunu {

class Recorder;

class Buffer;
namespace cpu {
class ThreadPool;
}

enum class Backend { kVulkan, kCpu };

// One entry of list_devices(): `index` is the position in that list, which is the order of
// preference (discrete, integrated, virtual, CPU Vulkan devices, then akunu's CPU backend) and
// what AKUNU_DEVICE=<index> refers to. `reason` says why find_device chose it.
struct DeviceInfo {
    int index;
    Backend backend;
    DeviceProfile profile;
    std::string reason;
};

// What kind of device this is, in words: "discrete GPU (Vulkan)", "lavapipe (Vulkan on CPU)",
// "akunu CPU backend", ...
std::string device_kind(Backend backend, const DeviceProfile& profile);

// Every usable Vulkan device (Vulkan 1.2+), most preferred first, then the CPU backend (the
// last entry, always present: where no Vulkan device exists it is the only one).
std::vector<DeviceInfo> list_devices();
// The device Device::create(selector) would open, without opening it, with the reason.
DeviceInfo find_device(const std::string& selector = "", const std::string& tuning = "");

class Device : public std::enable_shared_from_this<Device> {
public:
    // `selector`: "" picks AKUNU_DEVICE if set, else the most preferred Vulkan GPU, else the
    // CPU backend (where Vulkan offers only CPU implementations such as lavapipe, which run
    // the same kernels far slower); "cpu" is the native CPU backend, "vulkan" the
    // most preferred Vulkan device; otherwise an index into list_devices() or a
    // case-insensitive substring of a device's name (the CPU backend's included). `tuning`:
    // "key=value,..." applied over AKUNU_TUNE (core/tuning.h).
    static std::shared_ptr<Device> create(const std::string& selector = "", const std::string& tuning = "");
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const DeviceProfile& profile() const { return profile_; }
    Backend backend() const { return backend_; }
    bool is_cpu() const { return backend_ == Backend::kCpu; }
    // The CPU backend's workers (null on Vulkan).
    cpu::ThreadPool* threads() const { return threads_.get(); }
    VkDevice handle() const { return device_; }
    VkPhysicalDevice physical() const { return physical_; }
    VkQueue queue() const { return queue_; }
    uint32_t queue_family() const { return queue_family_; }
    const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_; }

    // Memory for a Buffer from this device's backend (memory.h); free_memory returns it, and
    // address_of gives the address shaders reach it through (the host pointer on the CPU).
    Allocation allocate_memory(size_t bytes, Residency residency, bool addressable);
    void free_memory(const Allocation& a);
    uint64_t address_of(const Allocation& a) const;

    // What a CommandList records into on this device's backend (recorder.h).
    std::unique_ptr<Recorder> recorder(uint32_t max_timestamps);

    // Convenience for Buffer::allocate on this device.
    Buffer allocate(size_t bytes);
    Buffer allocate(const void* data, size_t bytes);

    // The pipeline for an embedded kernel (a row of shaders/kernels.cmake) with the given
    // specialization constants (constant_id i takes spec[i]). Made once, then cached.
    const Pipeline& pipeline(const std::string& kernel, const std::vector<uint32_t>& spec = {});

    // What the driver compiled each pipeline made so far to (VK_KHR_pipeline_executable_properties:
    // on NVIDIA "Register Count", "Shared Memory Size", "Local Memory Size" for spills, ...);
    // empty where the device does not report them (DeviceProfile::kernel_statistics).
    std::vector<KernelStatistics> kernel_statistics() const;

    // Records with `record`, submits on the compute queue and waits. For uploads, readbacks and
    // tests; the decode loop replays prerecorded command buffers instead.
    void run_once(const std::function<void(VkCommandBuffer)>& record);

    // vkQueueSubmit on the compute queue; the queue needs external synchronisation, so every
    // submission in akunu goes through here.
    void submit(const VkSubmitInfo& info, VkFence fence);

    // The staging area: host memory that Buffer::read and Buffer::write copy through where a
    // buffer is not mapped (or a large read would cross the bus uncached), in pieces of at most
    // its size. Its owners plan it at load: reserve_staging(bytes) grows it to the largest
    // transfer of their hot path (a logits row, a decoder step's logits), so that one piece holds
    // those; it never holds less than tuning staging_kib. No transfer of any size allocates once
    // it exists (the first staged transfer of a device that none reserved makes it). Nothing on
    // the CPU backend, whose buffers are all host memory.
    void reserve_staging(size_t bytes);
    size_t staging_bytes() const;
    // Runs `piece(area, host, at, n)` for each piece [at, at + n) of `bytes` in order, with the
    // area's VkBuffer and host pointer, one staged transfer at a time.
    void stage(size_t bytes, const std::function<void(VkBuffer, void*, size_t, size_t)>& piece);

    // Accounting, updated by Buffer. `allocations_total` never decreases, so a hot path that
    // allocates shows up as a change in it.
    uint64_t allocated_bytes() const { return allocated_bytes_; }
    int64_t live_buffers() const { return live_buffers_; }
    uint64_t allocations_total() const { return allocations_total_; }
    void on_allocate(uint64_t bytes) {
        allocated_bytes_ += bytes;
        ++live_buffers_;
        ++allocations_total_;
    }
    void on_free(uint64_t bytes) {
        allocated_bytes_ -= bytes;
        --live_buffers_;
    }

private:
    Device(std::shared_ptr<Instance> instance, VkPhysicalDevice physical, const Tuning& tuning);
    std::unique_ptr<Pipeline> make_pipeline(const std::string& kernel, const std::vector<uint32_t>& spec);
    explicit Device(const Tuning& tuning);  // the CPU backend

    // Frees the CPU backend's workers where their type is complete (backend/devices.cpp), so
    // that the Vulkan side never includes the CPU backend.
    struct ThreadPoolDeleter {
        void operator()(cpu::ThreadPool* pool) const;
    };

    Backend backend_ = Backend::kVulkan;
    std::unique_ptr<cpu::ThreadPool, ThreadPoolDeleter> threads_;
    std::shared_ptr<Instance> instance_;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    DeviceProfile profile_;
    VkPhysicalDeviceMemoryProperties memory_{};
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t queue_family_ = 0;

    std::mutex queue_mutex_;
    std::mutex once_mutex_;  // guards the one-shot pool below
    VkCommandPool once_pool_ = VK_NULL_HANDLE;
    VkFence once_fence_ = VK_NULL_HANDLE;

    mutable std::mutex staging_mutex_;  // guards the staging area while a transfer uses it
    Allocation staging_;
    size_t staging_size_ = 0;
    void grow_staging(size_t bytes);
    void free_staging();

    mutable std::mutex pipelines_mutex_;
    VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
    std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;

    std::atomic<uint64_t> allocated_bytes_{0};
    std::atomic<int64_t> live_buffers_{0};
    std::atomic<uint64_t> allocations_total_{0};
};

}  // namespace akunu
