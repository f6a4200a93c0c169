// Building a DeviceProfile from Vulkan 1.0-1.3 property and feature structs.
#include "akunu/vulkan/device_profile.h"

#include <algorithm>
#include <cstdio>

#include "akunu/core/error.h"
#include "akunu/vulkan/shader_library.h"
#include "akunu/vulkan/vk_coopmat2.h"
#include "akunu/vulkan/vk_loader.h"
#include "gemm_tiles.h"

namespace akunu {

// The tile GEMV of several rows costs about a GEMV's time per row of x beyond a fixed part,
// where the short tiles' cost is flat up to 8 rows; they cross near 5 rows (bench/NOTES.md, "The
// tile GEMV of several rows of x").
constexpr int kGemmTileRowsAuto = 4;

bool int8_activations_requested() { return feature_on(Feature::kInt8); }

const char* device_type_name(DeviceType type) {
    switch (type) {
        case DeviceType::kDiscrete: return "discrete";
        case DeviceType::kIntegrated: return "integrated";
        case DeviceType::kVirtual: return "virtual";
        case DeviceType::kCpu: return "cpu";
        default: return "other";
    }
}

static DeviceType to_device_type(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return DeviceType::kDiscrete;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return DeviceType::kIntegrated;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return DeviceType::kVirtual;
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return DeviceType::kCpu;
        default: return DeviceType::kOther;
    }
}

static std::string vendor_name(uint32_t id) {
    struct Vendor {
        uint32_t id;
        const char* name;
    };
    static const Vendor kVendors[] = {
        {0x10DE, "NVIDIA"},   {0x1002, "AMD"},   {0x8086, "Intel"},       {0x13B5, "ARM"},
        {0x5143, "Qualcomm"}, {0x106B, "Apple"}, {0x1010, "Imagination"}, {0x10005, "Mesa"},
    };
    for (const auto& v : kVendors)
        if (v.id == id) return v.name;
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%04X", id);
    return buf;
}

std::vector<std::string> device_extensions(VkPhysicalDevice device) {
    uint32_t n = 0;
    AKUNU_VK_CHECK(vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr));
    std::vector<VkExtensionProperties> props(n);
    AKUNU_VK_CHECK(vkEnumerateDeviceExtensionProperties(device, nullptr, &n, props.data()));
    std::vector<std::string> names;
    for (uint32_t i = 0; i < n; ++i) names.emplace_back(props[i].extensionName);
    return names;
}

DeviceProfile query_device_profile(VkPhysicalDevice device, const Tuning& tuning) {
    DeviceProfile p;
    const auto exts = device_extensions(device);
    auto has = [&](const char* name) { return std::find(exts.begin(), exts.end(), name) != exts.end(); };

    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties maint3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceShaderCorePropertiesAMD amd{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    subgroup.pNext = &maint3;
    maint3.pNext = &driver;
    void** tail = &driver.pNext;
    if (has(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) *tail = &sm, tail = &sm.pNext;
    if (has(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) *tail = &amd, tail = &amd.pNext;
    VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props2.pNext = &subgroup;
    vkGetPhysicalDeviceProperties2(device, &props2);
    const VkPhysicalDeviceProperties& props = props2.properties;
    const VkPhysicalDeviceLimits& limits = props.limits;

    p.name = props.deviceName;
    p.type = to_device_type(props.deviceType);
    p.vendor_id = props.vendorID;
    p.device_id = props.deviceID;
    p.vendor = vendor_name(props.vendorID);
    p.driver = std::string(driver.driverName) + " " + driver.driverInfo;
    p.api_version = props.apiVersion;

    p.subgroup_size = subgroup.subgroupSize;
    const bool compute_ops = subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
    p.subgroup_arithmetic = compute_ops && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    p.subgroup_shuffle = compute_ops && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    p.shared_memory_bytes = limits.maxComputeSharedMemorySize;
    p.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
    p.max_workgroup_count_x = limits.maxComputeWorkGroupCount[0];
    p.compute_units = sm.shaderSMCount
                          ? sm.shaderSMCount
                          : amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
    p.max_storage_buffer_range = limits.maxStorageBufferRange;
    p.max_push_constants_bytes = limits.maxPushConstantsSize;
    p.min_storage_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
    p.max_memory_allocation_bytes = maint3.maxMemoryAllocationSize;

    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    VkPhysicalDeviceSubgroupSizeControlFeatures ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    f11.pNext = &f12;
    const bool v13 = props.apiVersion >= VK_API_VERSION_1_3;
    if (v13 || has(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) {
        f12.pNext = &dot;
        dot.pNext = (v13 || has(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) ? &ssc : nullptr;
    } else if (has(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
        f12.pNext = &ssc;
    }
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f11;
    vk::CooperativeMatrix2FeaturesNV cm2;
    if (has(vk::kNvCooperativeMatrix2)) {
        cm2.pNext = features.pNext;
        features.pNext = &cm2;
    }
    vkGetPhysicalDeviceFeatures2(device, &features);

    p.fp16 = f12.shaderFloat16 && f11.storageBuffer16BitAccess;
    p.int8 = f12.shaderInt8 && f12.storageBuffer8BitAccess;
    p.buffer_device_address = f12.bufferDeviceAddress;
    p.integer_dot_product = dot.shaderIntegerDotProduct;
    p.subgroup_size_control = ssc.subgroupSizeControl && ssc.computeFullSubgroups;
    p.cooperative_matrix = has("VK_KHR_cooperative_matrix");
    p.cooperative_matrix2 = has("VK_NV_cooperative_matrix2");
    p.bfloat16 = has("VK_KHR_shader_bfloat16");
    p.tuning = tuning;
    p.gemm_coopmat = has(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) && p.fp16 && p.subgroup_size == 32 && tuning.coopmat;
    p.gemm_coopmat2 = p.gemm_coopmat && has(vk::kKhrCooperativeMatrix) && cm2.cooperativeMatrixWorkgroupScope &&
                      cm2.cooperativeMatrixFlexibleDimensions && cm2.cooperativeMatrixTensorAddressing &&
                      has_spirv("gemm_cm2_f16") && tuning.coopmat2;
    p.indirect_counts = tuning.indirect_counts;
    // Short tiles: on where the device is a CPU (lavapipe) or runs cooperative matrices.
    const bool short_default = p.type == DeviceType::kCpu || p.gemm_coopmat;
    const int short_rows = tuning.gemm_short_rows >= 0 ? tuning.gemm_short_rows
                           : !short_default            ? 0
                           : p.gemm_coopmat            ? AKUNU_GEMM_CM_SHORT_ROWS
                                                       : AKUNU_GEMM_SHORT_ROWS;
    p.gemm_short_rows = uint32_t(short_rows);
    p.int8_activations = int8_activations_requested();
    p.float_x = tuning.float_x;
    // Dequantizing a block-format matrix to f16 costs about what 100 rows of its GEMM save
    // (bench/NOTES.md): on for chunks of 128 tokens or more where the GEMM is the cooperative-
    // matrix one. With cooperative matrix 2 the f16 GEMM is fast enough that every chunk past
    // the short tiles gains ("Chunks past the short tiles on cooperative matrix 2").
    const uint32_t dequant_default = p.gemm_coopmat2 && short_rows > 0 ? uint32_t(short_rows) + 1
                                     : p.gemm_coopmat                  ? 128u
                                                                       : 0u;
    p.prefill_dequant_rows = tuning.prefill_dequant_rows >= 0 ? uint32_t(tuning.prefill_dequant_rows) : dequant_default;
    p.gemv_int_dot = p.integer_dot_product && p.subgroup_shuffle && p.subgroup_size >= 8 && tuning.int_dot;
    // gemv_tiles.comp adds each block's sums of x over 8 neighbouring invocations by shuffles.
    const bool tiles_fit = p.subgroup_shuffle && p.subgroup_size >= 8;
    p.weight_tiles = !tuning.weight_tiles || !tiles_fit ? WeightTiles::kNone : WeightTiles::kBlocks32;
    const int tile_rows = tuning.gemm_tile_rows >= 0 ? tuning.gemm_tile_rows : kGemmTileRowsAuto;
    p.gemm_tile_rows = p.weight_tiles == WeightTiles::kNone ? 0u : uint32_t(tile_rows);
    p.gemv_handoff = tuning.gemv_handoff == Choice::kAuto ? p.vendor_id == 0x10DE : tuning.gemv_handoff == Choice::kOn;
    p.norm_forward = tuning.norm_forward;
    p.spin_wait = tuning.spin_wait == Choice::kAuto ? p.type != DeviceType::kCpu : tuning.spin_wait == Choice::kOn;
    p.push_descriptors = has(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    if (has(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
        VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
        VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        f.pNext = &exec;
        vkGetPhysicalDeviceFeatures2(device, &f);
        p.kernel_statistics = exec.pipelineExecutableInfo;
    }

    uint32_t n_families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(device, &n_families, nullptr);
    std::vector<VkQueueFamilyProperties> families(n_families);
    vkGetPhysicalDeviceQueueFamilyProperties(device, &n_families, families.data());
    for (const auto& f : families)
        if ((f.queueFlags & VK_QUEUE_COMPUTE_BIT) && f.timestampValidBits > 0) p.timestamps = true;
    p.timestamp_period_ns = limits.timestampPeriod;

    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(device, &mem);
    p.unified_memory = true;
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
        MemoryHeap heap{mem.memoryHeaps[h].size, bool(mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT),
                        false};
        bool mappable_device_local = false;
        for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
            const auto flags = mem.memoryTypes[t].propertyFlags;
            if (mem.memoryTypes[t].heapIndex != h) continue;
            if (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) heap.host_visible = true;
            if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
                mappable_device_local = true;
        }
        if (heap.device_local) {
            p.device_local_bytes = std::max(p.device_local_bytes, heap.size_bytes);
            if (mappable_device_local)
                p.host_visible_device_bytes = std::max(p.host_visible_device_bytes, heap.size_bytes);
            else
                p.unified_memory = false;
        }
        p.heaps.push_back(heap);
    }
    if (p.device_local_bytes == 0) p.unified_memory = false;
    if (has(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 mem2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, &budget};
        vkGetPhysicalDeviceMemoryProperties2(device, &mem2);
        for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
            if (mem.memoryHeaps[h].size == p.device_local_bytes && budget.heapBudget[h] > budget.heapUsage[h])
                p.available_bytes = std::max(p.available_bytes, budget.heapBudget[h] - budget.heapUsage[h]);
    }
    return p;
}

static std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

// printf-style formatting into a std::string. iostreams are avoided on purpose: some toolchains
// link a static libstdc++ into the Python module, and its locale state then crashes ostream.
template <class... Args>
static void appendf(std::string& out, const char* format, Args... args) {
    char buf[512];
    std::snprintf(buf, sizeof buf, format, args...);
    out += buf;
}

std::string DeviceProfile::describe() const {
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    std::string s;
    if (api_version)
        appendf(s, "%s (%s, %s, Vulkan %u.%u.%u)\n", name.c_str(), device_type_name(type), vendor.c_str(),
                VK_API_VERSION_MAJOR(api_version), VK_API_VERSION_MINOR(api_version),
                VK_API_VERSION_PATCH(api_version));
    else  // akunu's CPU backend: no Vulkan underneath
        appendf(s, "%s (%s, %s, no Vulkan)\n", name.c_str(), device_type_name(type), vendor.c_str());
    appendf(s, "  driver            %s\n", driver.c_str());
    appendf(s, "  subgroup size     %u (arithmetic %s, shuffle %s, size control %s)\n", subgroup_size,
            yn(subgroup_arithmetic), yn(subgroup_shuffle), yn(subgroup_size_control));
    appendf(s, "  shared memory     %u KiB per workgroup, %u invocations max\n", shared_memory_bytes / 1024,
            max_workgroup_invocations);
    if (compute_units) appendf(s, "  compute units     %u\n", compute_units);
    appendf(s, "  storage binding   %llu MiB max, offset alignment %llu B, push constants %u B\n",
            (unsigned long long)(max_storage_buffer_range >> 20),
            (unsigned long long)min_storage_buffer_offset_alignment, max_push_constants_bytes);
    appendf(s, "  features          fp16 %s  int8 %s  integer dot %s (gemv %s)  bf16 %s  push descriptors %s\n",
            yn(fp16), yn(int8), yn(integer_dot_product), yn(gemv_int_dot), yn(bfloat16), yn(push_descriptors));
    appendf(s, "  matrix units      coopmat %s  coopmat2 %s  gemm coopmat %s\n", yn(cooperative_matrix),
            yn(cooperative_matrix2), yn(gemm_coopmat));
    if (gemv_handoff) appendf(s, "  decode            GEMVs hand x off through counters, not barriers\n");
    if (norm_forward && !cpu_backend) appendf(s, "  decode            float GEMVs hand the next norm forward\n");
    if (spin_wait && !cpu_backend) appendf(s, "  decode            steps waited for by polling, not sleeping\n");
    if (gemm_coopmat2) appendf(s, "  prefill           f16 GEMMs on workgroup-scope cooperative matrices (coopmat2)\n");
    if (gemm_short_rows)
        appendf(s, "  prefill           chunks of up to %u tokens in short GEMM tiles\n", gemm_short_rows);
    if (gemm_tile_rows)
        appendf(s, "  prefill           GEMMs of up to %u rows of tile weights in tile GEMVs of several rows\n",
                gemm_tile_rows);
    if (kernel_statistics)
        appendf(s, "  kernel statistics yes (registers and shared memory per kernel, from the driver)\n");
    if (prefill_dequant_rows > 0)
        appendf(s, "  prefill           block-format weights dequantized to f16 for chunks of %u tokens or more\n",
                prefill_dequant_rows);
    // A discrete GPU whose memory is all host-visible (ReBAR) still maps only part of it to a
    // process; buffers past that are unmapped (vk_memory.cpp), their views staged.
    const char* views = !unified_memory                 ? ""
                        : type == DeviceType::kDiscrete ? " (zero-copy views while the driver maps, staged past that)"
                                                        : " (unified, zero-copy views)";
    appendf(s, "  memory            device-local %s, of it host-visible %s%s\n", gib(device_local_bytes).c_str(),
            gib(host_visible_device_bytes).c_str(), views);
    for (size_t i = 0; i < heaps.size(); ++i)
        appendf(s, "    heap %zu          %s%s%s\n", i, gib(heaps[i].size_bytes).c_str(),
                heaps[i].device_local ? " device-local" : "", heaps[i].host_visible ? " host-visible" : "");
    appendf(s, "  timestamps        %s, period %g ns", timestamps ? "yes" : "no", timestamp_period_ns);
    return s;
}

}  // namespace akunu
