// Every kernel against a CPU reference on odd sizes, with outputs poisoned (NaN) beforehand so
// that an element the kernel fails to write cannot pass. Also: barrier placement, argument
// checks and timestamps.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "akunu/vulkan/command_list.h"
#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/kv_format.h"
#include "params.h"
#include "kernel_buffers.h"
#include "vk_test.h"

namespace akunu::test {

using KernelTest = VkTest;

TEST_F(KernelTest, FillWritesEveryElement) {
    auto dev = device();
    for (DType dt : {DType::kF32, DType::kF16}) {
        for (size_t n : {size_t(1), size_t(255), size_t(257), size_t(70001)}) {
            Buffer out = poisoned(dev, n + 3, dt);  // 3 sentinels past the end must stay NaN
            CommandList cl(dev);
            cl.begin();
            kernels::fill(cl, out, dt, n, 1.5f);
            cl.end();
            cl.submit_and_wait();
            auto got = download(out, n + 3, dt);
            for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 1.5f) << "n=" << n << " i=" << i;
            for (size_t i = n; i < n + 3; ++i) ASSERT_TRUE(std::isnan(got[i])) << "wrote past n at " << i;
        }
    }
}

TEST_F(KernelTest, FillU32WritesBits) {
    auto dev = device();
    Buffer out = dev->allocate(17 * 4);
    CommandList cl(dev);
    cl.begin();
    kernels::fill(cl, out, DType::kU32, 17, 0.0f, 0xDEADBEEFu);
    cl.end();
    cl.submit_and_wait();
    std::vector<uint32_t> got(17);
    out.read(got.data(), 17 * 4);
    for (uint32_t v : got) EXPECT_EQ(v, 0xDEADBEEFu);
}

TEST_F(KernelTest, CopyMovesExactlyTheWords) {
    auto dev = device();
    for (size_t words : {size_t(1), size_t(7), size_t(1024), size_t(100003)}) {  // vector and scalar paths
        std::vector<uint32_t> src(words);
        for (size_t i = 0; i < words; ++i) src[i] = uint32_t(i * 2654435761u);
        Buffer gs = dev->allocate(src.data(), words * 4);
        std::vector<uint32_t> sentinel(words + 4, 0xFFFFFFFFu);
        Buffer gd = dev->allocate(sentinel.data(), sentinel.size() * 4);
        CommandList cl(dev);
        cl.begin();
        kernels::copy(cl, gs, gd, words * 4);
        cl.end();
        cl.submit_and_wait();
        std::vector<uint32_t> got(words + 4);
        gd.read(got.data(), got.size() * 4);
        for (size_t i = 0; i < words; ++i) ASSERT_EQ(got[i], src[i]) << "words=" << words << " i=" << i;
        for (size_t i = words; i < words + 4; ++i) ASSERT_EQ(got[i], 0xFFFFFFFFu) << "wrote past the end";
    }
    CommandList cl(dev);
    cl.begin();
    Buffer b = dev->allocate(64);
    EXPECT_THROW(kernels::copy(cl, b, b, 6), Error);  // not whole words
    EXPECT_THROW(kernels::copy(cl, b, b, 128), Error);  // past the buffers
    cl.end();
}

TEST_F(KernelTest, AddMatchesCpu) {
    auto dev = device();
    for (DType dt : {DType::kF32, DType::kF16}) {
        const size_t n = 4099;
        std::vector<float> a, b;
        Buffer ga = upload(dev, random_floats(n, 3), dt, &a);
        Buffer gb = upload(dev, random_floats(n, 4), dt, &b);
        Buffer gc = poisoned(dev, n, dt);
        CommandList cl(dev);
        cl.begin();
        kernels::add(cl, ga, gb, gc, dt, n);
        cl.end();
        cl.submit_and_wait();
        std::vector<float> want(n);
        for (size_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
        expect_close(download(gc, n, dt), want, dt == DType::kF16 ? 1e-3f : 1e-6f, 1e-6f, "add");
    }
}

// Mirrors test_softcap in tests/python/test_kernels.py: in place on the step's first rows only.
TEST_F(KernelTest, SoftcapCapsTheStepsRows) {
    auto dev = device();
    const size_t rows = 5, n = 301, n_tokens = 3;
    const float cap = 30.0f;
    std::vector<float> x = random_floats(rows * n, 21), unused;
    for (float& v : x) v *= 200.0f;  // far past the cap
    Buffer gx = upload(dev, x, DType::kF32, &unused);
    const uint32_t step_state[4] = {0, 0, uint32_t(n_tokens), 0};
    Buffer step = dev->allocate(step_state, sizeof step_state);
    CommandList cl(dev);
    cl.begin();
    kernels::softcap(cl, gx, step, rows, n, cap);
    cl.end();
    cl.submit_and_wait();
    std::vector<float> want = x;
    for (size_t i = 0; i < n_tokens * n; ++i) want[i] = float(cap * std::tanh(double(x[i]) / cap));
    expect_close(download(gx, rows * n, DType::kF32), want, 2e-6f, 2e-5f, "softcap");
    EXPECT_THROW(kernels::softcap(cl, gx, step, rows, n, 0.0f), Error);
    EXPECT_THROW(kernels::softcap(cl, gx, step, rows + 1, n, cap), Error);  // past the buffer
}

// Rows of x normed in double precision (eps 1e-5), times w + offset.
static std::vector<float> rmsnorm_reference(const std::vector<float>& x, const std::vector<float>& w, size_t rows,
                                            size_t dim, float offset) {
    std::vector<float> want(rows * dim);
    for (size_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (size_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
        const double scale = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (size_t i = 0; i < dim; ++i) want[r * dim + i] = float(x[r * dim + i] * scale * (w[i] + offset));
    }
    return want;
}

TEST_F(KernelTest, RmsNormMatchesCpu) {
    auto dev = device();
    for (DType dt : {DType::kF32, DType::kF16}) {
        for (auto [rows, dim] : {std::pair<size_t, size_t>{3, 1}, {5, 77}, {2, 1000}, {7, 4097}}) {
            for (float offset : {0.0f, 1.0f}) {
                std::vector<float> x, w;
                Buffer gx = upload(dev, random_floats(rows * dim, 5, -3, 3), dt, &x);
                Buffer gw = upload(dev, random_floats(dim, 6), dt, &w);
                Buffer gy = poisoned(dev, rows * dim, dt);
                CommandList cl(dev);
                cl.begin();
                kernels::rmsnorm(cl, gx, gw, gy, dt, rows, dim, 1e-5f, offset);
                cl.end();
                cl.submit_and_wait();
                const std::vector<float> want = rmsnorm_reference(x, w, rows, dim, offset);
                expect_close(download(gy, rows * dim, dt), want, dt == DType::kF16 ? 2e-3f : 1e-5f, 1e-5f,
                             "rmsnorm dim=" + std::to_string(dim));
            }
        }
    }
}

// f32 rows normed into halves (a prefill chunk's GEMM input), on both paths: 4-vectors where
// dim is a multiple of 4 (1000, 4096), single values otherwise (77).
TEST_F(KernelTest, RmsNormToHalvesMatchesCpu) {
    auto dev = device();
    for (auto [rows, dim] : {std::pair<size_t, size_t>{5, 77}, {3, 1000}, {2, 4096}}) {
        const std::vector<float> x = random_floats(rows * dim, 7, -3, 3), w = random_floats(dim, 8);
        Buffer gx = dev->allocate(x.data(), x.size() * 4), gw = dev->allocate(w.data(), w.size() * 4);
        Buffer gy = poisoned(dev, rows * dim, DType::kF16);
        CommandList cl(dev);
        cl.begin();
        kernels::rmsnorm_to_f16(cl, gx, gw, gy, rows, dim, 1e-5f, 0.0f);
        cl.end();
        cl.submit_and_wait();
        const std::vector<float> want = rmsnorm_reference(x, w, rows, dim, 0.0f);
        expect_close(download(gy, rows * dim, DType::kF16), want, 2e-3f, 1e-3f,
                     "rmsnorm_to_f16 dim=" + std::to_string(dim));
    }
}

TEST_F(KernelTest, GemvMatchesCpu) {
    auto dev = device();
    for (DType wt : {DType::kF16, DType::kF32}) {
        // Odd row counts leave partial workgroups; k % 4 != 0 takes the scalar path.
        for (auto [rows, k] : {std::pair<size_t, size_t>{1, 1}, {7, 33}, {33, 256}, {130, 1001}, {257, 4096}}) {
            std::vector<float> w, x;
            Buffer gw = upload(dev, random_floats(rows * k, 7), wt, &w);
            Buffer gx = upload(dev, random_floats(k, 8), DType::kF32, &x);
            Buffer gy = poisoned(dev, rows, DType::kF32);
            CommandList cl(dev);
            cl.begin();
            kernels::gemv(cl, gw, wt == DType::kF16 ? TensorType::F16 : TensorType::F32, gx, gy, rows, k);
            cl.end();
            cl.submit_and_wait();
            std::vector<float> want(rows);
            for (size_t r = 0; r < rows; ++r) {
                double acc = 0;
                for (size_t i = 0; i < k; ++i) acc += double(w[r * k + i]) * x[i];
                want[r] = float(acc);
            }
            expect_close(download(gy, rows, DType::kF32), want, 1e-4f, 1e-4f,
                         "gemv rows=" + std::to_string(rows) + " k=" + std::to_string(k));
        }
    }
}

// Decode attention over an f16 cache against a double-precision softmax: query-head groups of
// 1, 2, 3, 4, 8 and 12 per KV head (a workgroup takes up to 4 heads of a group; the CPU backend
// takes up to 8 a workgroup, so 12 runs as 8 and 4), head sizes from 16 to 256 with one that is
// not a multiple of 16 (some lanes hold no vector), positions inside the first chunk, on chunk
// boundaries and across three chunks, a sliding window and a softcap. Every shape runs two
// steps on one partial buffer, so an arrival counter left non-zero by the first would break the
// second. On the suite's device, then the CPU backend.
TEST_F(KernelTest, DecodeAttentionMatchesSoftmax) {
    struct Case {
        uint32_t n_heads, n_kv, head_dim, window;
        float softcap;
    };
    const uint32_t max_len = 700;
    for (const bool cpu : {false, true})
        for (const Case c :
             {Case{3, 3, 64, 0, 0.0f}, Case{4, 2, 16, 0, 0.0f}, Case{9, 3, 40, 0, 0.0f}, Case{8, 2, 128, 300, 0.0f},
              Case{16, 2, 64, 0, 5.0f}, Case{4, 1, 256, 0, 0.0f}, Case{24, 2, 32, 0, 0.0f}}) {
            auto dev = cpu ? Device::create("cpu") : device();
            const size_t q_dim = size_t(c.n_heads) * c.head_dim, rows = size_t(c.n_kv) * max_len * c.head_dim;
            std::vector<float> k, v, q;
            Buffer kb = upload(dev, random_floats(rows, 21, -2.0f, 2.0f), DType::kF16, &k);
            Buffer vb = upload(dev, random_floats(rows, 22), DType::kF16, &v);
            Buffer qb = upload(dev, random_floats(q_dim, 23), DType::kF32, &q);
            const std::vector<float> zeros(kernels::attention_partial_floats(c.n_heads, c.head_dim, max_len), 0.0f);
            Buffer partial = dev->allocate(zeros.data(), zeros.size() * 4);
            const float scale = 1.0f / std::sqrt(float(c.head_dim));
            const kernels::AttentionShape shape{c.n_heads, c.n_kv, c.head_dim, max_len, c.window, scale, c.softcap};
            const KvBindings cache{KvDType::kF16, &kb, &vb, {}, {}, KvRows::kFull, max_len};
            for (const uint32_t pos : {0u, 255u, 256u, 699u, 511u}) {
                const StepState st{pos, 0, 1, 0};
                Buffer step = dev->allocate(&st, sizeof(st));
                Buffer out = poisoned(dev, q_dim, DType::kF32);
                CommandList cl(dev);
                cl.begin();
                kernels::attention(cl, &qb, cache, &partial, &out, &step, shape);
                cl.end();
                cl.submit_and_wait();
                const size_t first = c.window > 0 && pos + 1 > c.window ? pos + 1 - c.window : 0;
                std::vector<float> want(q_dim);
                for (size_t h = 0; h < c.n_heads; ++h) {
                    reference_attention(&q[h * c.head_dim], k, v, h / (c.n_heads / c.n_kv), max_len, c.head_dim, first,
                                        pos, scale, c.softcap, &want[h * c.head_dim]);
                }
                expect_close(download(out, q_dim, DType::kF32), want, 1e-4f, 1e-4f,
                             std::string(cpu ? "cpu " : "") + "attention heads=" + std::to_string(c.n_heads) + "/" +
                                 std::to_string(c.n_kv) + " head_dim=" + std::to_string(c.head_dim) +
                                 " pos=" + std::to_string(pos));
            }
        }
}

// Prefill attention against a double-precision causal softmax, on the scalar kernel
// (flash_attention.comp) and, where the device has cooperative matrices, on flash_cm.comp: head
// sizes 64 and 128, query-head groups, a chunk of 77 rows starting at position 30 (blocks of 16
// and 64 rows and tiles of 16 and 32 keys all end inside the chunk), a sliding window and a
// softcap. flash_cm rounds Q and the weights to halves, hence its 5e-3 (outputs lie in [-1, 1]);
// it also writes halves (the O projection's GEMM X in a chunk), within the same tolerance.
TEST_F(KernelTest, FlashAttentionMatchesSoftmax) {
    struct Case {
        uint32_t n_heads, n_kv, head_dim, window;
        float softcap;
    };
    const uint32_t max_len = 160, start = 30, rows = 77;
    bool ran = false;  // flash_cm
    for (const bool coopmat : {false, true}) {
        // The scalar kernel on a device tuned away from flash_cm (tuning flash_coopmat=0).
        auto dev = coopmat ? device() : Device::create(test_selector(), "flash_coopmat=0");
        for (const Case c :
             {Case{4, 2, 64, 0, 0.0f}, Case{3, 3, 128, 0, 0.0f}, Case{4, 1, 128, 40, 0.0f}, Case{2, 2, 64, 0, 5.0f}}) {
            const KvBindings probe{KvDType::kF16, nullptr, nullptr, {}, {}, KvRows::kFull, max_len};
            if (coopmat != kernels::flash_attention_coopmat(dev->profile(), probe, c.head_dim)) continue;
            ran = ran || coopmat;
            const size_t q_dim = size_t(c.n_heads) * c.head_dim, cache_n = size_t(c.n_kv) * max_len * c.head_dim;
            std::vector<float> k, v, q;
            Buffer kb = upload(dev, random_floats(cache_n, 31, -2.0f, 2.0f), DType::kF16, &k);
            Buffer vb = upload(dev, random_floats(cache_n, 32), DType::kF16, &v);
            Buffer qb = upload(dev, random_floats(rows * q_dim, 33, -2.0f, 2.0f), DType::kF32, &q);
            const StepState st{start, 0, rows, 0};
            Buffer step = dev->allocate(&st, sizeof(st));
            const float scale = 1.0f / std::sqrt(float(c.head_dim));
            const kernels::AttentionShape shape{c.n_heads, c.n_kv, c.head_dim, max_len, c.window, scale, c.softcap};
            const KvBindings cache{KvDType::kF16, &kb, &vb, {}, {}, KvRows::kFull, max_len};
            std::vector<float> want(rows * q_dim);
            for (size_t r = 0; r < rows; ++r) {
                const size_t pos = start + r, first = c.window > 0 && pos + 1 > c.window ? pos + 1 - c.window : 0;
                for (size_t h = 0; h < c.n_heads; ++h) {
                    const size_t at = r * q_dim + h * c.head_dim;
                    reference_attention(&q[at], k, v, h / (c.n_heads / c.n_kv), max_len, c.head_dim, first, pos, scale,
                                        c.softcap, &want[at]);
                }
            }
            const float tol = coopmat ? 5e-3f : 1e-4f;
            for (const DType out_dtype : {DType::kF32, DType::kF16}) {
                if (out_dtype == DType::kF16 && !coopmat) continue;
                Buffer out = poisoned(dev, rows * q_dim, out_dtype);
                CommandList cl(dev);
                cl.begin();
                kernels::flash_attention(cl, &qb, cache, &out, &step,
                                         {shape, rows, uint32_t(q_dim), uint32_t(q_dim), out_dtype});
                cl.end();
                cl.submit_and_wait();
                expect_close(download(out, rows * q_dim, out_dtype), want, tol, tol,
                             std::string(coopmat ? "flash_cm" : "flash_attention") +
                                 " heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv) +
                                 " head_dim=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window) +
                                 (out_dtype == DType::kF16 ? " f16 out" : ""));
            }
        }
    }
    if (!ran) GTEST_SKIP() << "the scalar kernel passed; flash_cm needs a GPU with cooperative matrices";
}

// Random k-quant blocks (any bytes are valid quants and sub-block scales) with small finite f16
// scales at the given byte offsets; `ref` gets them dequantized by the CPU dequantizer.
static Buffer random_k_blocks(const std::shared_ptr<Device>& dev, TensorType type, const std::vector<size_t>& scales,
                              size_t n, std::vector<float>* ref) {
    const TensorTypeTraits& t = type_traits(type);
    std::vector<uint8_t> raw(n / t.block_size * t.block_bytes);
    const std::vector<float> bytes = random_floats(raw.size(), 11, 0.0f, 255.99f);
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = uint8_t(bytes[i]);
    const std::vector<float> d = random_floats(n / t.block_size, 12, -0.05f, 0.05f);
    for (size_t b = 0; b < d.size(); ++b)
        for (size_t off : scales) {
            const uint16_t h = float_to_half(d[b]);
            std::memcpy(&raw[b * t.block_bytes + off], &h, 2);
        }
    ref->resize(n);
    dequantize(t, raw.data(), ref->data(), n, "test");
    return dev->allocate(raw.data(), raw.size());
}

// Mirrors tests/python/test_kernels.py for the formats read in the file's rows only (the
// k-quants, Q5_0 and Q5_1): 7 rows of 3 super-blocks make 21 blocks, so half of the 210-byte
// Q6_K blocks start off a 4-byte boundary, and every other 22-byte Q5_0 block does.
TEST_F(KernelTest, RowBlockGemvAndGemmMatchCpu) {
    auto dev = device();
    const size_t rows = 7, k = 768, m = 5;
    const std::pair<TensorType, std::vector<size_t>> types[] = {{TensorType::Q4_K, {0, 2}},
                                                                {TensorType::Q5_K, {0, 2}},
                                                                {TensorType::Q6_K, {208}},
                                                                {TensorType::Q5_0, {0}},
                                                                {TensorType::Q5_1, {0, 2}}};
    for (const auto& [type, scales] : types) {
        std::vector<float> w, x;
        Buffer gw = random_k_blocks(dev, type, scales, rows * k, &w);
        Buffer gx = upload(dev, random_floats(m * k, 13), DType::kF32, &x);
        Buffer gy = poisoned(dev, rows, DType::kF32), gym = poisoned(dev, m * rows, DType::kF32);
        const uint32_t step_state[4] = {0, 0, uint32_t(m), 0};
        Buffer step = dev->allocate(step_state, sizeof step_state);
        CommandList cl(dev);
        cl.begin();
        kernels::gemv(cl, gw, type, gx, gy, rows, k);
        kernels::gemm(cl, gw, type, gx, gym, {m, rows, k, k, rows}, step);
        cl.end();
        cl.submit_and_wait();
        std::vector<float> want(m * rows);
        float wmax = 0;
        for (float v : w) wmax = std::max(wmax, std::fabs(v));
        for (size_t i = 0; i < m; ++i)
            for (size_t r = 0; r < rows; ++r) {
                double acc = 0;
                for (size_t j = 0; j < k; ++j) acc += double(w[r * k + j]) * x[i * k + j];
                want[i * rows + r] = float(acc);
            }
        const float atol = 1e-4f * wmax * std::sqrt(float(k));
        const std::string name = type_traits(type).name;
        expect_close(download(gy, rows, DType::kF32), {want.begin(), want.begin() + rows}, 1e-4f, atol, "gemv " + name);
        if (!dev->profile().gemm_coopmat)  // f16 operands on the cooperative-matrix path: the Python test covers it
            expect_close(download(gym, m * rows, DType::kF32), want, 1e-4f, atol, "gemm " + name);
    }
}

// rope_kv takes four pairs (and V elements) an invocation where its rows start on 16 bytes; a
// row stride of one float more takes the one-pair path. Both rotate Q and K in place and write
// the f16 cache rows of the reference, for GGUF's adjacent pairs and HF's split halves, on an
// odd number of rows from position 5 (rows past the chunk's tokens stay untouched).
TEST_F(KernelTest, RopeKvInFoursMatchesOnePairAnInvocation) {
    auto dev = device();
    const ModelConfig c = attention_config(4, 2, 16);
    const uint32_t max_len = 40, rows = 7, tokens = 5, pos = 5, half = 8, q_dim = 64, kv_dim = 32,
                   row = q_dim + 2 * kv_dim;
    const std::vector<float> cos = random_floats(max_len * half, 3), sin = random_floats(max_len * half, 4);
    Buffer cos_b = dev->allocate(cos.data(), cos.size() * 4), sin_b = dev->allocate(sin.data(), sin.size() * 4);
    const StepState st{pos, 0, tokens, 0};
    Buffer step = dev->allocate(&st, sizeof(st));
    for (const bool interleaved : {true, false})
        for (const uint32_t stride : {row, row + 1}) {
            const std::vector<float> qkv = random_floats(rows * stride, 5);
            Buffer qkv_b = dev->allocate(qkv.data(), qkv.size() * 4);
            KVCache kv(dev, c, int(max_len));
            CommandList cl(dev);
            cl.begin();
            kernels::rope_kv(cl, &qkv_b, &cos_b, &sin_b, kv.bindings(0), &step,
                             {4, 2, 16, max_len, interleaved, true, rows, stride});
            cl.end();
            cl.submit_and_wait();
            std::vector<float> got(qkv.size()), want = qkv;
            qkv_b.read(got.data(), got.size() * 4);
            std::vector<float> k_want(2 * (pos + tokens) * 16, 0.0f), v_want(k_want.size(), 0.0f);
            for (uint32_t r = 0; r < tokens; ++r) {
                float* x = want.data() + r * stride;
                for (uint32_t h = 0; h < 6; ++h)  // 4 Q heads, then 2 K heads
                    for (uint32_t f = 0; f < half; ++f) {
                        const uint32_t a = h * 16 + (interleaved ? 2 * f : f), b = interleaved ? a + 1 : a + half;
                        const float cf = cos[(pos + r) * half + f], sf = sin[(pos + r) * half + f];
                        const float x0 = x[a], x1 = x[b];
                        x[a] = x0 * cf - x1 * sf;
                        x[b] = x0 * sf + x1 * cf;
                    }
                for (uint32_t h = 0; h < 2; ++h)
                    for (uint32_t d = 0; d < 16; ++d) {
                        k_want[(h * (pos + tokens) + pos + r) * 16 + d] =
                            half_to_float(float_to_half(x[q_dim + h * 16 + d]));
                        v_want[(h * (pos + tokens) + pos + r) * 16 + d] =
                            half_to_float(float_to_half(x[q_dim + kv_dim + h * 16 + d]));
                    }
            }
            const std::string what =
                std::string(interleaved ? "adjacent pairs" : "split halves") + ", stride " + std::to_string(stride);
            for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f) << what << ", element " << i;
            for (const bool values : {false, true}) {
                const std::vector<uint8_t> side = kv.read_side(0, values, false, int(pos + tokens));
                ASSERT_EQ(side.size(), k_want.size() * 2);
                for (size_t i = 0; i < k_want.size(); ++i) {
                    if ((i / 16) % (pos + tokens) < pos) continue;  // rows before the chunk: not written
                    uint16_t h;
                    std::memcpy(&h, side.data() + 2 * i, 2);
                    ASSERT_NEAR(half_to_float(h), (values ? v_want : k_want)[i], 1e-3f)
                        << what << (values ? ", V " : ", K ") << i;
                }
            }
        }
}

TEST_F(KernelTest, RejectsWrongShapesAndTypes) {
    auto dev = device();
    Buffer small = dev->allocate(16), big = dev->allocate(4096);
    CommandList cl(dev);
    cl.begin();
    try {
        kernels::gemv(cl, small, TensorType::F16, big, big, 10, 10);
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gemv: W needs 200 bytes"), std::string::npos) << e.what();
    }
    EXPECT_THROW(kernels::add(cl, big, big, big, DType::kU8, 4), Error);
    EXPECT_THROW(kernels::rmsnorm(cl, big, big, big, DType::kF32, 0, 4, 1e-5f), Error);
    EXPECT_EQ(cl.dispatch_count(), 0u);
    cl.end();
}

}  // namespace akunu::test
