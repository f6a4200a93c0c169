// The CPU backend's kernel interface: how a dispatch reaches a C++ kernel. Part of the backend
// interface (Pipeline carries a CpuKernel); cpu/ implements it (kernel_registry.cpp).
//
// A CPU kernel implements one row of shaders/kernels.cmake with the GLSL kernel's semantics: it
// reads the same parameter struct (params.h) and the same bindings, in binding order, and is
// called over ranges of the same workgroups the launcher asked for (linear id
// x + y * groups_x + z * groups_x * groups_y), so the launchers in kernels.cpp serve both
// backends unchanged. Ranges of one dispatch run on different threads; a kernel writes only
// what its workgroups own, as on the GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace akunu::cpu {

constexpr int kMaxBindings = 14;  // gemv_tiles.comp takes 14, the most of any kernel
constexpr int kMaxParamBytes = 80;  // GemvParams
constexpr int kMaxSpec = 8;  // gemv.comp takes 7, the most of any kernel

struct CpuArgs {
    uint8_t* b[kMaxBindings] = {};  // each binding's first byte (buffer contents + offset)
    size_t bytes[kMaxBindings] = {};  // bytes visible through it
    alignas(16) uint8_t params[kMaxParamBytes] = {};
    uint32_t spec[kMaxSpec] = {};  // specialization constants (0 where not given)
    uint32_t groups[3] = {1, 1, 1};
    uint32_t variant = 0;  // the registry row's variant: weight type, KV formats, ...

    template <class P>
    const P& p() const {
        static_assert(sizeof(P) <= kMaxParamBytes);
        return *reinterpret_cast<const P*>(params);
    }
    template <class T>
    T* at(int i) const {
        return reinterpret_cast<T*>(b[i]);
    }
};

// Runs workgroups [begin, end) of one dispatch.
using CpuKernelFn = void (*)(const CpuArgs& args, size_t begin, size_t end);

struct CpuKernel {
    CpuKernelFn fn = nullptr;
    uint32_t variant = 0;  // passed to fn in CpuArgs::variant (one function serves many rows)
    // Workgroups below which splitting over threads is not worth waking them.
    uint32_t min_groups_per_thread = 1;
    // A CPU-only kernel (no shader of its own) names the shader whose bindings and parameters
    // it shares: "gemv_q4_0" for "gemv_q4_0_t32". Null: the kernel's own name.
    const char* interface = nullptr;
};

// The C++ kernel for an embedded kernel name ("gemv_q4_0"). Throws akunu::Error naming the
// kernel when the CPU backend has none (a GPU-only feature).
CpuKernel find_kernel(const std::string& name);
bool has_kernel(const std::string& name);

// Registration: each kernels_*.cpp file adds its rows to the table through these.
struct KernelRow {
    const char* name;
    CpuKernel kernel;
};
void register_elementwise(void (*add)(const KernelRow&));
void register_matmul(void (*add)(const KernelRow&));
void register_attention(void (*add)(const KernelRow&));
void register_sample(void (*add)(const KernelRow&));
void register_encoder(void (*add)(const KernelRow&));
void register_whisper_chain(void (*add)(const KernelRow&));
void register_audio(void (*add)(const KernelRow&));
void register_tiles(void (*add)(const KernelRow&));
void register_mlx(void (*add)(const KernelRow&));

}  // namespace akunu::cpu
