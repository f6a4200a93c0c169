// DeviceProfile: what a Vulkan device offers, read once from its properties and features.
//
// Later stages pick kernel variants, workgroup sizes, fusion and chain length from it, never
// from the device's name (docs/architecture.md, "Device profile"). Its policy fields combine
// what the device offers with the device's Tuning (core/tuning.h), read once at creation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "akunu/core/tuning.h"
#include "akunu/formats/tiles.h"

namespace akunu {

enum class DeviceType { kDiscrete, kIntegrated, kVirtual, kCpu, kOther };
const char* device_type_name(DeviceType type);

struct MemoryHeap {
    uint64_t size_bytes;
    bool device_local;
    bool host_visible;  // some memory type on this heap can be mapped by the CPU
};

// AKUNU_INT8 set to anything but 0 (DeviceProfile::int8_activations).
bool int8_activations_requested();

struct DeviceProfile {
    // Identity
    std::string name;  // as the driver reports it, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
    DeviceType type = DeviceType::kOther;
    std::string vendor;  // "NVIDIA", "AMD", "Intel", "Mesa", ...
    uint32_t vendor_id = 0;
    uint32_t device_id = 0;
    std::string driver;  // driver name and info
    uint32_t api_version = 0;
    bool cpu_backend = false;  // akunu's native CPU backend (C++ kernels), not a Vulkan device

    // Compute limits
    uint32_t subgroup_size = 0;  // 8 on lavapipe, 32 on NVIDIA, 32/64 on AMD
    bool subgroup_arithmetic = false;  // subgroupAdd/subgroupMax and friends in compute
    bool subgroup_shuffle = false;
    uint32_t shared_memory_bytes = 0;  // per workgroup
    uint32_t max_workgroup_invocations = 0;
    uint32_t max_workgroup_count_x = 0;
    // Streaming multiprocessors or compute units, where a vendor extension says
    // (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties); 0 where unknown.
    uint32_t compute_units = 0;
    uint64_t max_storage_buffer_range = 0;  // largest single binding (128 MiB on lavapipe)
    uint32_t max_push_constants_bytes = 0;
    uint64_t min_storage_buffer_offset_alignment = 0;
    uint64_t max_memory_allocation_bytes = 0;

    // Arithmetic features
    bool fp16 = false;  // shaderFloat16 + 16-bit storage
    bool int8 = false;  // shaderInt8 + 8-bit storage
    bool integer_dot_product = false;
    bool cooperative_matrix = false;  // VK_KHR_cooperative_matrix
    bool cooperative_matrix2 = false;  // VK_NV_cooperative_matrix2
    // The prefill GEMM's cooperative-matrix variant: VK_NV_cooperative_matrix (what glslang 12,
    // Debian 12's compiler, emits) with 32-wide subgroups; tuning coopmat=0 turns it off.
    bool gemm_coopmat = false;
    // The f16 prefill GEMM on workgroup-scope cooperative matrices (gemm_cm2_f16): devices with
    // VK_NV_cooperative_matrix2's workgroup scope, flexible dimensions and tensor addressing,
    // where the build embeds the kernel (kernels.cmake, AKUNU_SLANG_GLSLANG); tuning
    // coopmat2=0 turns it off.
    bool gemm_coopmat2 = false;
    // Chunks of up to this many tokens run their GEMMs in short tiles (0: none). Scalar
    // (gemm_short_<wtype>, 16 x 256, 64 tokens): a quarter of the products of its 64 x 64
    // tiles for a 2-token prompt, in a quarter of the workgroups; on where the device is a CPU
    // (lavapipe), whose cost is the products. Cooperative-matrix (gemm_cm_short_<wtype>, 16 x
    // 32, 96 tokens, gemm_tiles.h): 4 to 16 times the workgroups of the 128 x 128 tiles, which
    // would leave most SMs idle; on with gemm_coopmat. tuning gemm_short_rows sets the row count
    // (0: none).
    uint32_t gemm_short_rows = 0;
    // GEMMs of tile-major Q8_0/Q4_0/Q4_1 weights that see up to this many rows run gemm_rows.comp,
    // the tile GEMV of several rows of x: a GEMV's rate at one row, where the short tiles take as
    // long for one row as for eight (bench/NOTES.md, "The tile GEMV of several rows of x"). On
    // where weights are tile-major; tuning gemm_tile_rows sets it.
    uint32_t gemm_tile_rows = 0;
    // Dispatches that follow a chunk's length or a step's position read their workgroup counts
    // at run time (DispatchTable: indirect dispatches); tuning indirect_counts=0 records them with the
    // whole chunk's or context's counts instead, for A/B measurements.
    bool indirect_counts = true;
    // Prefill chunks of at least this many tokens dequantize each block-format projection to
    // f16 (dequant.comp) and run the f16 GEMM on it; shorter ones, and 0, run the block
    // format's own GEMM. Past the short tiles' rows where gemm_coopmat2, 128 where gemm_coopmat,
    // else 0; tuning prefill_dequant_rows overrides.
    uint32_t prefill_dequant_rows = 0;
    // The integer-dot GEMV of Q8_0/Q4_0/Q4_1 (gemv_dot.comp): integer dot products, and
    // subgroups of 8 or more with shuffles; tuning int_dot=0 turns it off. What the device can
    // do: the engine rounds x to int8 only with int8_activations, and to int16 in tiles otherwise
    // (kernels::engine_x_rounding).
    bool gemv_int_dot = false;
    // Tile-major projection matrices: all of them on the CPU backend; on Vulkan devices the
    // 32-element block formats, whose tile GEMV (gemv_tiles.comp) reads a tile column of 32 rows
    // as coalesced 16-byte chunks (the *_T32V layouts, formats/tiles.h) and x once per 32 rows.
    // Tuning weight_tiles=0 keeps the file's layout (AKUNU_INT8 then runs gemv_dot.comp on the
    // rows, else the tiles' int8 form, gemv_tiles.comp X_INT8).
    WeightTiles weight_tiles = WeightTiles::kNone;
    // Consecutive tile GEMVs of a decode step hand x off through counters instead of a barrier
    // (kernels::GemvHandoff): on NVIDIA GPUs, which start a dispatch's workgroups before the
    // next one's. Tuning gemv_handoff=1 turns it on elsewhere (lavapipe runs one dispatch after
    // another, so the waits pass at once: what the tests use), 0 off.
    bool gemv_handoff = false;
    // A decode step's float GEMVs that add into the residual stream hand the next pre-norm
    // forward (kernels::GemvNormOut): on Vulkan devices; tuning norm_forward=0 off (A/B).
    bool norm_forward = false;
    // CommandList::submit_and_wait polls the fence instead of sleeping in vkWaitForFences, which
    // wakes the caller late after a short submission; a split model waits on each part of every
    // step (bench/NOTES.md, the split's hand-off). On GPUs; never on CPU-type devices, whose
    // threads run on the cores a poll would take. Tuning spin_wait=0/1 decides instead.
    bool spin_wait = false;
    bool bfloat16 = false;  // VK_KHR_shader_bfloat16
    bool push_descriptors = false;
    // VK_KHR_pipeline_executable_properties: the driver reports what it compiled each kernel to
    // (registers, shared memory, spills; Device::kernel_statistics), which says how many
    // workgroups fit on a compute unit at once.
    bool kernel_statistics = false;
    bool buffer_device_address = false;  // core in 1.2, optional: a KV cache in blocks needs it
    bool subgroup_size_control = false;

    // Timing
    // AKUNU_INT8=1 when the device was created: the engine's quantized GEMVs round x to 8 bits per
    // block and use integer dot products (GPU: gemv_int_dot devices; CPU: q4_0/q4_1). Off by default,
    // where they round it to 16 bits (kernels::engine_x_rounding): the reference tolerances hold
    // for that rounding, not for 8 bits.
    bool int8_activations = false;
    // Tuning float_x=1 when the device was created (and AKUNU_INT8 unset): the engine's GEMVs of
    // tile-major Q8_0/Q4_0/Q4_1 keep x as fp32 instead of rounding it to int16 (about 1.15-1.3x
    // slower decode; for measurements and for exact products).
    bool float_x = false;
    // CPU backend: the GEMMs of more than a few rows on float tiles sum bf16 products (tuning
    // bf16_gemm, where the processor has AVX-512 BF16; cpu/gemm_bf16.h).
    bool gemm_bf16 = false;
    bool timestamps = false;  // the compute queue can write timestamps
    double timestamp_period_ns = 0;

    // Memory
    std::vector<MemoryHeap> heaps;
    uint64_t device_local_bytes = 0;  // the largest device-local heap
    uint64_t host_visible_device_bytes = 0;  // device-local memory the CPU can map (ReBAR/UMA)
    bool unified_memory = false;  // every device-local heap is also host-visible
    // What the largest device-local heap can still take when the profile was read: its
    // VK_EXT_memory_budget budget less its usage, or the host's available memory on the CPU
    // backend; 0 where the device does not say. The memory plan fits against this.
    uint64_t available_bytes = 0;

    Tuning tuning;  // what the device was created with (core/tuning.h)

    // A multi-line, human-readable summary, as `python -m akunu` prints it.
    std::string describe() const;
};

// Reads the profile of `device`. Needs Vulkan 1.2 properties.
DeviceProfile query_device_profile(VkPhysicalDevice device, const Tuning& tuning = Tuning::from_environment());

// Every extension `device` offers, by name.
std::vector<std::string> device_extensions(VkPhysicalDevice device);

}  // namespace akunu
