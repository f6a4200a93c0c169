// The one place that chooses a backend: the list of devices (the Vulkan devices, then akunu's CPU
// backend), selection by name or index, and the Device members whose parts differ by backend
// (memory, pipelines, recorders, the CPU backend's constructor). vulkan/ and cpu/ implement the
// parts; neither includes the other's implementation.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "akunu/core/error.h"
#include "akunu/core/tuning.h"
#include "akunu/cpu/cpu_memory.h"
#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/cpu_recorder.h"
#include "akunu/cpu/thread_pool.h"
#include "akunu/vulkan/device.h"
#include "akunu/vulkan/pipeline.h"
#include "akunu/vulkan/vk_memory.h"
#include "akunu/vulkan/vk_recorder.h"

namespace akunu {

// ---------------------------------------------------------------------------------------------
// Enumeration and selection
// ---------------------------------------------------------------------------------------------

static int preference_rank(DeviceType t) {
    switch (t) {
        case DeviceType::kDiscrete: return 0;
        case DeviceType::kIntegrated: return 1;
        case DeviceType::kVirtual: return 2;
        case DeviceType::kCpu: return 3;
        default: return 4;
    }
}

// A device one can open: a Vulkan physical device, or (physical null) the CPU backend.
struct Candidate {
    VkPhysicalDevice physical;
    DeviceProfile profile;
    Backend backend() const { return physical ? Backend::kVulkan : Backend::kCpu; }
};

// Every device, most preferred first: the usable Vulkan devices (Vulkan 1.2+; the sort is
// stable so driver order breaks ties), then the CPU backend, which is always there. The
// instance stays alive with the list, since the physical devices belong to it.
struct Candidates {
    std::shared_ptr<Instance> instance;  // null where Vulkan offers nothing
    std::vector<Candidate> all;
    std::string vulkan_error;  // why there is no Vulkan device, where there is none
};

static Candidates candidates(const Tuning& tuning = Tuning::from_environment()) {
    Candidates c;
    try {
        c.instance = Instance::get();
        for (VkPhysicalDevice pd : c.instance->physical_devices()) {
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(pd, &props);
            if (props.apiVersion < VK_API_VERSION_1_2) continue;  // akunu's kernels need Vulkan 1.2
            c.all.push_back({pd, query_device_profile(pd, tuning)});
        }
        AKUNU_CHECK(!c.all.empty(),
                    "no Vulkan 1.2 device found; akunu needs Vulkan 1.2 or newer "
                    "(Debian/Ubuntu: apt install mesa-vulkan-drivers for the CPU device lavapipe)");
    } catch (const Error& e) {  // no loader, no driver, or no device with Vulkan 1.2
        c.vulkan_error = e.what();
    }
    std::stable_sort(c.all.begin(), c.all.end(), [](const Candidate& a, const Candidate& b) {
        return preference_rank(a.profile.type) < preference_rank(b.profile.type);
    });
    c.all.push_back({VK_NULL_HANDLE, cpu::cpu_profile(tuning)});
    return c;
}

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> out;
    int i = 0;
    for (auto& c : candidates().all) out.push_back({i++, c.backend(), std::move(c.profile), ""});
    return out;
}

static std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// The selector in force: `selector`, else AKUNU_DEVICE; `source` names where it came from.
static std::string effective_selector(const std::string& selector, const char** source) {
    const std::string env = feature_value(Feature::kDevice);
    const bool from_env = selector.empty() && !env.empty();
    *source = from_env ? "AKUNU_DEVICE" : "device";
    return from_env ? env : selector;
}

std::string device_kind(Backend backend, const DeviceProfile& profile) {
    if (backend == Backend::kCpu) return "akunu CPU backend";
    if (profile.type != DeviceType::kCpu) return std::string(device_type_name(profile.type)) + " GPU (Vulkan)";
    // Mesa's lavapipe names its device after its rasterizer, llvmpipe.
    return lower(profile.name).find("llvmpipe") != std::string::npos ? "lavapipe (Vulkan on CPU)" : "Vulkan on CPU";
}

// The default: the most preferred Vulkan device that is not a CPU implementation, else the CPU
// backend. A Vulkan driver on the CPU (lavapipe) runs akunu's kernels for correctness, many
// times slower than the CPU backend runs the same model, so it is chosen only by name.
static size_t default_device(const Candidates& c, std::string* reason) {
    for (size_t i = 0; i + 1 < c.all.size(); ++i)
        if (c.all[i].profile.type != DeviceType::kCpu) {
            *reason = "the default: the most preferred Vulkan GPU";
            return i;
        }
    if (c.all.size() == 1)
        *reason = "the default: no Vulkan device here (" + c.vulkan_error + ")";
    else
        *reason = "the default: the Vulkan devices here, such as " + device_kind(Backend::kVulkan, c.all[0].profile) +
                  ", run on the CPU, far slower than akunu's CPU backend (--device vulkan picks one)";
    return c.all.size() - 1;
}

// The position in c.all of the device a selector names: "" the default, "cpu" the CPU backend,
// "vulkan" the first Vulkan device, "vulkan:N" the Nth (cards of one kind share a name), an
// index, or a case-insensitive substring of a name.
static size_t select(const Candidates& c, const std::string& selector, const char* source, std::string* reason) {
    const std::vector<Candidate>& all = c.all;
    const std::string sel = lower(selector);
    if (sel.empty()) return default_device(c, reason);
    *reason = "asked for: " + std::string(source) + " '" + selector + "'";
    if (sel == "cpu") return all.size() - 1;
    if (sel == "vulkan") {
        AKUNU_CHECK(all.front().backend() == Backend::kVulkan, std::string(source) + " 'vulkan': " + c.vulkan_error);
        return 0;
    }
    auto digits = [](const std::string& t) {
        return !t.empty() && std::all_of(t.begin(), t.end(), [](unsigned char ch) { return std::isdigit(ch); });
    };
    if (sel.rfind("vulkan:", 0) == 0 && digits(sel.substr(7))) {
        const size_t i = std::stoul(sel.substr(7));  // Vulkan devices come first, the CPU backend last
        if (i < all.size() && all[i].backend() == Backend::kVulkan) return i;
    }
    const bool is_index = digits(sel);
    if (is_index) {
        const size_t i = std::stoul(sel);
        if (i < all.size()) return i;
    } else {
        for (size_t i = 0; i < all.size(); ++i)
            if (lower(all[i].profile.name).find(sel) != std::string::npos) return i;
    }
    std::string message = std::string(source) + " '" + selector + "' matches no device. Devices here:";
    for (size_t i = 0; i < all.size(); ++i)
        message += "\n  " + std::to_string(i) + ": " + all[i].profile.name + " (" +
                   device_kind(all[i].backend(), all[i].profile) + ")";
    if (!c.vulkan_error.empty()) message += "\nNo Vulkan device: " + c.vulkan_error;
    message +=
        "\nGive an index or part of a name, 'vulkan' for the best Vulkan device ('vulkan:N' for the Nth), or 'cpu' for "
        "akunu's CPU backend.";
    throw Error(message);
}

DeviceInfo find_device(const std::string& selector, const std::string& tuning) {
    const char* source;
    const std::string sel = effective_selector(selector, &source);
    Candidates c = candidates(Tuning::from_environment(tuning));
    std::string reason;
    const size_t i = select(c, sel, source, &reason);
    return {int(i), c.all[i].backend(), std::move(c.all[i].profile), reason};
}

std::shared_ptr<Device> Device::create(const std::string& selector, const std::string& tuning) {
    const Tuning t = Tuning::from_environment(tuning);
    const char* source;
    const std::string sel = effective_selector(selector, &source);
    // The CPU backend by name makes no Vulkan instance: it runs where no loader is installed.
    if (lower(sel) == "cpu") return std::shared_ptr<Device>(new Device(t));
    Candidates c = candidates();
    std::string reason;
    const Candidate& chosen = c.all[select(c, sel, source, &reason)];
    if (chosen.backend() == Backend::kCpu) return std::shared_ptr<Device>(new Device(t));
    return std::shared_ptr<Device>(new Device(c.instance, chosen.physical, t));
}

// The one place where a device's backend chooses its memory and its commands' form.
Allocation Device::allocate_memory(size_t bytes, Residency residency, bool addressable) {
    if (!is_cpu()) return vk_allocate(*this, bytes, residency, addressable);
    const Allocation a = cpu::allocate_pages(bytes);
    AKUNU_CHECK(a.contents, "out of memory allocating " + std::to_string(bytes >> 20) + " MiB on '" + profile_.name +
                                "'; " + std::to_string(allocated_bytes() >> 20) +
                                " MiB are already allocated by akunu");
    return a;
}

void Device::free_memory(const Allocation& a) {
    if (is_cpu())
        cpu::free_pages(a);
    else
        vk_free(*this, a);
}

// The CPU kernels reach memory through host pointers: the address is the pointer itself.
uint64_t Device::address_of(const Allocation& a) const {
    return is_cpu() ? uint64_t(reinterpret_cast<uintptr_t>(a.contents)) : vk_address(*this, a);
}

// On the CPU backend a kernel name resolves to a C++ kernel; in int8 mode a kernel with an
// integer-dot form ("gemv_q4_0_t32_i8") runs that form, else, unless tuning int_gemm=0, one with
// an integer form registered where the processor has it: with int8_gemm its 8-bit x form
// ("gemm_q4_0_t32_x8"), else its 16-bit one ("gemm_q4_0_t32_i16"); one with a bf16 form
// ("gemm_f16_t32_bf16", where the processor has AVX-512 BF16) runs that under tuning bf16_gemm.
std::unique_ptr<Pipeline> Device::make_pipeline(const std::string& kernel, const std::vector<uint32_t>& spec) {
    if (!is_cpu()) return std::make_unique<Pipeline>(*this, pipeline_cache_, kernel, spec);
    const Tuning& t = profile_.tuning;
    const char* form = "";
    if (profile_.int8_activations && cpu::has_kernel(kernel + "_i8"))
        form = "_i8";
    else if (t.int_gemm && t.int8_gemm && cpu::has_kernel(kernel + "_x8"))
        form = "_x8";
    else if (t.int_gemm && cpu::has_kernel(kernel + "_i16"))
        form = "_i16";
    else if (profile_.gemm_bf16 && cpu::has_kernel(kernel + "_bf16"))
        form = "_bf16";
    return std::make_unique<Pipeline>(cpu::find_kernel(kernel + form), kernel, spec);
}

std::unique_ptr<Recorder> Device::recorder(uint32_t max_timestamps) {
    if (is_cpu()) return cpu::make_recorder(*this, max_timestamps);
    return make_vulkan_recorder(shared_from_this(), max_timestamps);
}

void Device::ThreadPoolDeleter::operator()(cpu::ThreadPool* pool) const { delete pool; }

// The CPU backend: no Vulkan objects at all, a profile describing this machine and the
// workers that run the kernels.
Device::Device(const Tuning& tuning)
    : backend_(Backend::kCpu),
      threads_(new cpu::ThreadPool(cpu::thread_count(), tuning.cpu_spin_us < 0 ? 100 : tuning.cpu_spin_us)),
      profile_(cpu::cpu_profile(tuning)) {}

}  // namespace akunu
