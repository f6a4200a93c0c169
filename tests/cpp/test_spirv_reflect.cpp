// The interface read from embedded SPIR-V must agree with the host structs in params.h.
#include "akunu/core/error.h"
#include "akunu/vulkan/shader_library.h"
#include "akunu/vulkan/spirv_reflect.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {

static ShaderInterface reflect(const std::string& name) {
    const SpirvModule& m = find_spirv(name);
    return reflect_spirv(m.words, m.n_words, name);
}

TEST(SpirvReflect, GemvBindingsAndPushConstants) {
    // gemv_core.glsl's kernels declare only the bindings they use. Aliased views of W, x and
    // the norm weight are merged.
    for (const char* t : {"f16", "f32", "bf16"}) {
        const std::string plain = std::string("gemv_") + t;
        ShaderInterface i = reflect(plain);
        // 4 to 6 a norm handed forward (GemvParams.norm_out): its weight, x and sums; 7 a
        // hand-off's counters, which it zeroes.
        ASSERT_EQ(i.bindings.size(), 8u) << plain;
        EXPECT_FALSE(i.bindings[0].written || i.bindings[1].written || i.bindings[3].written) << plain;
        EXPECT_TRUE(i.bindings[2].written) << plain;
        EXPECT_FALSE(i.bindings[4].written) << plain;
        EXPECT_TRUE(i.bindings[5].written && i.bindings[6].written && i.bindings[7].written) << plain;
        EXPECT_EQ(i.push_constant_bytes, sizeof(GemvParams));

        const std::string gate_up = std::string("gemv_gate_up_") + t;
        i = reflect(gate_up);
        ASSERT_EQ(i.bindings.size(), 5u) << gate_up;  // 4: W_up
        EXPECT_TRUE(i.bindings[2].written) << gate_up;
        EXPECT_FALSE(i.bindings[0].written || i.bindings[4].written) << gate_up;

        const std::string parts = std::string("gemv_parts_") + t;
        i = reflect(parts);
        // 4 and 5 the second and third matrix, 6 and 7 their outputs, 8 to 12 a folded
        // rope_kv's tables, caches and step.
        ASSERT_EQ(i.bindings.size(), 13u) << parts;
        EXPECT_FALSE(i.bindings[4].written || i.bindings[5].written || i.bindings[8].written) << parts;
        EXPECT_TRUE(i.bindings[2].written && i.bindings[6].written && i.bindings[7].written) << parts;
        EXPECT_TRUE(i.bindings[10].written && i.bindings[11].written) << parts;
    }
}

TEST(SpirvReflect, EveryKernelMatchesItsParamsStruct) {
    // The first row whose prefix (and suffix) matches: quantized-cache variants (scales at
    // bindings 5, 6) come before their f16 kernel, and cache-in-blocks variants (block tables
    // for K and V, scales inside the blocks) and f16 rings before both.
    const struct {
        const char* prefix;
        size_t bytes;
        size_t bindings;
        const char* suffix = "";
    } expected[] = {
        // A batch's rows in attention_split's layout: Q, the block tables, the partials, the step,
        // out and the arrival counters (binding 8), then a recent window's 3.
        {"attention_split_", sizeof(FlashAttentionParams), 10, "_batch_recent"},
        {"attention_split_", sizeof(FlashAttentionParams), 7, "_batch"},
        // A recent window's variants: the step's [q | k | v] rows and the two rings after the rest.
        {"attention_split_", sizeof(AttentionParams), 10, "_blocks_recent_pack"},
        {"attention_split_", sizeof(AttentionParams), 12, "_recent_pack"},
        {"attention_split_", sizeof(AttentionParams), 10, "_blocks_recent"},
        {"flash_attention_", sizeof(FlashAttentionParams), 8, "_blocks_recent"},
        {"attention_split_", sizeof(AttentionParams), 12, "_recent"},
        {"flash_attention_", sizeof(FlashAttentionParams), 10, "_recent"},
        {"kv_recent_store", sizeof(RopeKvParams), 4},
        {"kv_store_", sizeof(RopeKvParams), 4, "_blocks"},
        {"kv_store_", sizeof(RopeKvParams), 4, "_batch"},  // a batch's blocks: block tables, as _blocks
        {"attention_rows_", sizeof(FlashAttentionParams), 8, "_batch_recent"},  // and the window's 3 (kv_recent.glsl)
        {"attention_rows_", sizeof(FlashAttentionParams), 5, "_batch"},  // Q, the K and V block tables, out, step
        // A batched step's query tiles: binding 5 the tiles (params.h BatchTile).
        {"flash_attention_", sizeof(FlashAttentionParams), 6, "_batch"},
        {"flash_cm_d", sizeof(FlashAttentionParams), 6, "_batch"},
        {"attention_split_", sizeof(AttentionParams), 7, "_blocks_pack"},  // packs its step's row (KV_PACK)
        {"attention_split_", sizeof(AttentionParams), 7, "_blocks"},
        {"flash_attention_", sizeof(FlashAttentionParams), 5, "_blocks"},
        {"attention_split_ring", sizeof(AttentionParams), 7},
        {"flash_attention_ring", sizeof(FlashAttentionParams), 5},
        {"attention_split_", sizeof(AttentionParams), 9},
        {"flash_attention_", sizeof(FlashAttentionParams), 7},
        {"kv_store_", sizeof(RopeKvParams), 6},
        {"rope_only", sizeof(RopeKvParams), 6},
        {"fill_", sizeof(FillParams), 1},
        {"copy_rows", sizeof(CopyRowsParams), 5},  // src and dst with their row indices, the step
        {"copy_", sizeof(CopyParams), 2},
        {"read_", sizeof(CopyParams), 2},
        {"add_", sizeof(AddParams), 3},
        {"rmsnorm_", sizeof(RmsNormParams), 3},
        {"gemv_", sizeof(GemvParams), 14,
         "_t32v"},  // gemv_tiles.comp: up to three W and y, a folded rope_kv, hand-off counters
        {"gemv_", sizeof(GemvParams), 14, "_t32v_batch"},  // the same, its rope_kv into a batch's blocks
        {"gemv_", sizeof(GemvParams), 14, "_t32v_blocks"},  // ... or a cache in blocks
        {"gemv_gate_up_", sizeof(GemvParams), 5},  // gemv_core.glsl: the up matrix
        {"gemv_parts_", sizeof(GemvParams), 13},  // three W and y, a folded rope_kv
        {"gemv_f", sizeof(GemvParams), 8},
        {"gemv_bf16", sizeof(GemvParams), 8},  // float gemv.comp: a norm handed forward, hand-off counters
        {"gemv_", sizeof(GemvParams), 4},
        {"embed_", sizeof(EmbedParams), 4},
        {"rope_kv", sizeof(RopeKvParams), 6},
        {"attention_split", sizeof(AttentionParams), 7},  // its last binding: hand-off counters
        {"act_", sizeof(ActParams), 3},
        {"to_half", sizeof(ActParams), 3},  // act.comp: x, x (up, unread), the halves
        {"sample_batch", sizeof(SampleParams), 8},  // the scored targets: 5 and 6 out, 7 in
        {"sample", sizeof(SampleParams), 5},
        {"gemm_cm2_", sizeof(GemmParams), 5},  // binding 4: the gated variant's up matrix
        {"gemm_", sizeof(GemmParams), 4},
        {"flash_attention", sizeof(FlashAttentionParams), 5},
        {"flash_cm_d", sizeof(FlashAttentionParams), 5},
        {"last_row", sizeof(LastRowParams), 3},
        {"softcap", sizeof(SoftcapParams), 2},
        {"hadamard_rows", sizeof(HadamardRowsParams), 2},
        {"layernorm", sizeof(LayerNormParams), 5},
        {"encoder_attention_weights", sizeof(EncoderAttentionParams), 6},  // binding 5: the weights
        {"encoder_attention", sizeof(EncoderAttentionParams), 5},
        {"window_attention", sizeof(WindowAttentionParams), 4},
        {"span_split", sizeof(SpanSplitParams), 7},  // binding 5 twice: the counters and the partials
        {"whisper_chain_rows", sizeof(WhisperChainRowsParams), 10},
        {"whisper_pick", sizeof(WhisperPickParams), 7},
        {"conv_gather", sizeof(ConvGatherParams), 3},
        {"pool", sizeof(PoolParams), 3},
        {"mel_power", sizeof(MelParams), 4},
        {"mel_log", sizeof(MelParams), 4},
        {"mel_norm", sizeof(MelParams), 2},
        {"dequant_f16_", sizeof(DequantParams), 3},
    };
    size_t checked = 0;
    for (const auto& name : kernel_names()) {
        for (const auto& e : expected) {
            const std::string suffix = e.suffix;
            if (name.rfind(e.prefix, 0) != 0 || name.size() < suffix.size() ||
                name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
                continue;
            ShaderInterface i = reflect(name);
            EXPECT_EQ(i.push_constant_bytes, e.bytes) << name;
            EXPECT_EQ(i.bindings.size(), e.bindings) << name;
            ++checked;
            break;
        }
    }
    EXPECT_EQ(checked, kernel_names().size()) << "a kernel has no expectation here";
}

// The cache-in-blocks writers reach the blocks through device addresses, which the command
// list cannot see: their block tables must read as written so that the attention that reads
// the tables (and through them the blocks) gets a barrier after them.
TEST(SpirvReflect, BlockTablesStandForTheBlocksTheyWrite) {
    const ShaderInterface rope = reflect("rope_kv_blocks");
    EXPECT_TRUE(rope.bindings[3].written && rope.bindings[4].written);
    const ShaderInterface store = reflect("kv_store_q8_int4_blocks");
    EXPECT_TRUE(store.bindings[1].written && store.bindings[2].written);
    for (const char* reader : {"attention_split_blocks", "flash_attention_q8_blocks"}) {
        const ShaderInterface r = reflect(reader);
        EXPECT_FALSE(r.bindings[1].written || r.bindings[2].written) << reader;
    }
    // The decode attention that packs its step's row writes the cache: through the block tables,
    // or the words (1, 2) and scales (5, 6) of full rows; the plain one writes none of them.
    const ShaderInterface packs_blocks = reflect("attention_split_int4_blocks_pack");
    EXPECT_TRUE(packs_blocks.bindings[1].written && packs_blocks.bindings[2].written);
    const ShaderInterface packs = reflect("attention_split_q8_int4_pack"), reads = reflect("attention_split_q8_int4");
    for (const size_t b : {1, 2, 5, 6}) {
        EXPECT_TRUE(packs.bindings[b].written) << b;
        EXPECT_FALSE(reads.bindings[b].written) << b;
    }
}

// The capability that marks the kernels whose pipelines are created under a ValidationWaiver:
// declared by the cooperative-matrix-2 GEMM (where the build embeds it), not by the
// NV_cooperative_matrix one or any other kernel of the main table.
TEST(SpirvReflect, FindsTheCooperativeMatrixKhrCapability) {
    for (const auto& name : kernel_names())
        EXPECT_EQ(reflect(name).cooperative_matrix_khr, name.rfind("gemm_cm2_", 0) == 0) << name;
    if (!has_spirv("gemm_cm2_f16"))
        GTEST_SKIP() << "this build has no cooperative-matrix-2 kernels (AKUNU_SLANG_GLSLANG)";
    EXPECT_TRUE(reflect("gemm_cm2_f16").cooperative_matrix_khr);
}

TEST(SpirvReflect, RejectsGarbageAndUnknownNames) {
    const uint32_t junk[] = {0xDEADBEEF, 1, 2, 3, 4, 5};
    EXPECT_THROW(reflect_spirv(junk, 6, "junk"), Error);
    const SpirvModule& m = find_spirv("add_f32");
    size_t cut = 5;  // cut inside the first instruction of three or more words
    while ((m.words[cut] >> 16) < 3) cut += m.words[cut] >> 16;
    EXPECT_THROW(reflect_spirv(m.words, cut + 2, "truncated"), Error);
    EXPECT_THROW(find_spirv("no_such_kernel"), Error);
}

}  // namespace akunu::test
