// CPU profile, thread count and the run-time choice of instruction-set tier.
#include "akunu/cpu/cpu_profile.h"

#include <cpuid.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace akunu::cpu {

unsigned thread_count() {
    if (const std::string env = feature_value(Feature::kThreads); !env.empty()) {
        const long n = std::strtol(env.c_str(), nullptr, 10);
        if (n > 0 && n <= 1024) return unsigned(n);
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return unsigned(std::max(1, CPU_COUNT(&set)));
    return std::max(1u, std::thread::hardware_concurrency());
}

CpuIsa cpu_isa() {
    static const CpuIsa isa = [] {
        __builtin_cpu_init();
        // F16C through CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c".
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
        CpuIsa best = CpuIsa::kScalar;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) best = CpuIsa::kAvx2;
        if (best == CpuIsa::kAvx2 && __builtin_cpu_supports("avx512f")) best = CpuIsa::kAvx512;
        const std::string cap = feature_value(Feature::kCpuIsa);
        if (cap.empty()) return best;
        for (CpuIsa tier : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512})
            if (cap == cpu_isa_name(tier)) return std::min(best, tier);
        return best;  // an unknown name caps nothing (the profile's name shows the tier in use)
    }();
    return isa;
}

bool use_avx2() { return cpu_isa() >= CpuIsa::kAvx2; }
bool use_avx512() { return cpu_isa() >= CpuIsa::kAvx512; }
bool use_avx512_vnni() {
    static const bool vnni = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
    return use_avx512() && vnni;
}
bool use_avx512_bf16() {
    static const bool bf16 = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
    return use_avx512() && bf16;
}

const char* cpu_isa_name(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::kAvx512: return "avx512";
        case CpuIsa::kAvx2: return "avx2";
        default: return "scalar";
    }
}

// MemAvailable of /proc/meminfo (what the kernel can give without swapping), else the free pages.
static uint64_t available_host_memory() {
    if (FILE* f = std::fopen("/proc/meminfo", "r")) {
        char line[256];
        unsigned long long kib = 0;
        while (std::fgets(line, sizeof line, f))
            if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
        std::fclose(f);
        if (kib) return uint64_t(kib) * 1024;
    }
    return uint64_t(sysconf(_SC_AVPHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
}

DeviceProfile cpu_profile(const Tuning& tuning) {
    DeviceProfile p;
    p.tuning = tuning;
    p.int8_activations = int8_activations_requested();
    p.name = std::string("akunu CPU (") + std::to_string(thread_count()) + " threads, " +
             (use_avx512() ? "AVX-512"
              : use_avx2() ? "AVX2"
                           : "scalar") +
             (p.int8_activations ? ", int8 activations" : "") + ")";
    p.type = DeviceType::kCpu;
    p.cpu_backend = true;
    p.gemm_bf16 = tuning.bf16_gemm && use_avx512_bf16();
    p.weight_tiles = tuning.q5_tiles ? WeightTiles::kAll : WeightTiles::kAllButQ5;
    p.vendor = "akunu";
    p.driver = "akunu native CPU backend";
    p.api_version = 0;
    // Limits the launchers check; the CPU kernels run any geometry. subgroup_size and shuffles
    // describe what the attention kernels' semantics assume, which the C++ versions provide.
    p.subgroup_size = 8;
    p.subgroup_arithmetic = true;
    p.subgroup_shuffle = true;
    p.shared_memory_bytes = 1u << 20;
    p.max_workgroup_invocations = 1024;
    p.max_workgroup_count_x = 0x7FFFFFFFu;
    p.max_push_constants_bytes = 256;
    p.min_storage_buffer_offset_alignment = 16;
    const uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
    p.max_storage_buffer_range = ram;
    p.max_memory_allocation_bytes = ram;
    p.fp16 = true;
    p.int8 = true;
    p.push_descriptors = true;
    p.buffer_device_address = true;  // a buffer's address is its host pointer (Buffer::address)
    p.timestamps = true;  // the host clock, between commands (CommandList::timestamp)
    p.timestamp_period_ns = 1.0;
    p.heaps.push_back({ram, true, true});
    p.device_local_bytes = ram;
    p.host_visible_device_bytes = ram;
    p.unified_memory = true;
    p.available_bytes = available_host_memory();
    return p;
}

}  // namespace akunu::cpu
