// A batched step's attention (kernels::attention_rows with its query tiles) against a
// double-precision causal softmax: one step holding a decode row and runs of 37, 17 and 2 rows
// of other sequences, so that runs end inside tiles of 16 and 64 rows, one run leaves a row past
// its last whole tile to a tile of its own, and the runs cross the pool's block boundaries at 256
// and 512; query-head groups, head sizes 40 (scalar tiles only), 64 and 128, a sliding window
// and a softcap; a table of more rows than the step holds. On the flash_cm tiles (where the
// device has cooperative matrices), on the scalar flash_attention tiles (flash_coopmat=0) and
// row by row (batch_flash=0); on the CPU backend, its flash_attention tiles and row by row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "akunu/core/half.h"
#include "akunu/engine/batch_pipeline.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_pool.h"
#include "akunu/vulkan/command_list.h"
#include "kernel_buffers.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {

namespace {

using BatchTilesTest = VkTest;

struct StepRun {
    uint32_t seq, pos, rows;
};
constexpr int kContext = 600;
// The step's rows: a decode row, then runs crossing the blocks at 256 and 512, and a run of 2 at
// position 0.
constexpr StepRun kRuns[] = {{1, 100, 1}, {0, 250, 37}, {2, 500, 17}, {3, 0, 2}};
constexpr uint32_t kTableRows = 61;  // more than the step's 57 rows, not a multiple of a tile

// Each sequence's K and V as the pool holds them (f16-rounded), [n_kv, kContext, head_dim].
struct SeqKv {
    std::vector<float> k, v;
};

std::vector<SeqKv> fill_pool(KvPool& pool, uint32_t n_kv, uint32_t head_dim) {
    std::vector<SeqKv> kv(std::size(kRuns));
    for (const StepRun& r : kRuns) {
        const int length = int(r.pos + r.rows);
        for (const bool values : {false, true}) {
            const std::vector<float> x = random_floats(size_t(n_kv) * length * head_dim, 40 + 2 * r.seq + values,
                                                       values ? -1.0f : -2.0f, values ? 1.0f : 2.0f);
            std::vector<uint16_t> h(x.size());
            std::vector<float>& dst = values ? kv[r.seq].v : kv[r.seq].k;
            dst.assign(size_t(n_kv) * kContext * head_dim, 0.0f);
            for (size_t i = 0; i < x.size(); ++i) {
                h[i] = float_to_half(x[i]);
                const size_t head = i / (size_t(length) * head_dim), rest = i % (size_t(length) * head_dim);
                dst[head * kContext * head_dim + rest] = half_to_float(h[i]);
            }
            if (!values) pool.prepare_write(int(r.seq), 0, length);
            pool.write_side(int(r.seq), 0, values, 0, length, h.data());
        }
        pool.set_length(int(r.seq), length);
    }
    return kv;
}

// The step buffer (StepState, then kTableRows BatchRows) and the tiles cut for tile_rows.
std::vector<uint8_t> step_bytes(uint32_t tile_rows, std::vector<BatchTile>& tiles) {
    std::vector<BatchRow> rows;
    for (const StepRun& r : kRuns)
        for (uint32_t i = 0; i < r.rows; ++i)
            rows.push_back({r.seq, r.pos + i, r.pos, r.pos + r.rows, r.rows > 1 ? 1u : 0u});  // as Batch::step
    const uint32_t n = uint32_t(rows.size());
    tiles.assign(batch_tile_capacity(kTableRows), BatchTile{0, 0});
    cut_batch_tiles(rows.data(), int(n), tile_rows, tiles.data(), tiles.size());
    rows.resize(kTableRows, BatchRow{});
    std::vector<uint8_t> bytes(sizeof(StepState) + rows.size() * sizeof(BatchRow));
    const StepState st{0, 0, n, 0};
    std::memcpy(bytes.data(), &st, sizeof st);
    std::memcpy(bytes.data() + sizeof st, rows.data(), rows.size() * sizeof(BatchRow));
    return bytes;
}

}  // namespace

// cut_batch_tiles: the marked rows of one sequence at consecutive positions cut into tiles of up
// to tile_rows rows, a piece's last row past its whole tiles in a tile of its own, unmarked rows
// (decode rows) and rows past the capacity left to attention_rows, the entries past the tiles zero.
TEST(BatchTiles, MarkedRunsAreCutIntoTiles) {
    std::vector<BatchRow> rows = {{5, 9, 0, 0, 0}, {0, 3, 0, 0, 1}, {0, 4, 0, 0, 1}, {0, 5, 0, 0, 1}, {0, 6, 0, 0, 1},
                                  {0, 7, 0, 0, 1}, {2, 1, 0, 0, 1}, {2, 3, 0, 0, 1}, {4, 8, 0, 0, 0}, {4, 9, 0, 0, 0}};
    std::vector<BatchTile> tiles(6, BatchTile{7, 7});
    EXPECT_EQ(cut_batch_tiles(rows.data(), int(rows.size()), 2, tiles.data(), tiles.size()), 3u);
    // the untiled rows listed in row order, for attention_split's workgroups
    EXPECT_EQ(rows[0].untiled_row, 0u);
    EXPECT_EQ(rows[1].untiled_row, 8u);
    EXPECT_EQ(rows[2].untiled_row, 9u);
    // Sequence 0's 5 rows: 2, 2 and 1; sequence 2's rows are not at consecutive positions: 1 and
    // 1; sequence 4's rows are not marked.
    const BatchTile want[] = {{1, 2}, {3, 2}, {5, 1}, {6, 1}, {7, 1}, {0, 0}};
    for (size_t t = 0; t < tiles.size(); ++t) {
        EXPECT_EQ(tiles[t].first_row, want[t].first_row) << "tile " << t;
        EXPECT_EQ(tiles[t].rows, want[t].rows) << "tile " << t;
    }
    const uint32_t want_tiled[] = {0, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(rows[r].tiled, want_tiled[r]) << "row " << r;
    for (BatchRow& r : rows) r.tiled = r.seq == 0 || r.seq == 2;
    EXPECT_EQ(cut_batch_tiles(rows.data(), int(rows.size()), 2, tiles.data(), 1), 8u);  // room for one tile
    const uint32_t one_tile[] = {0, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(rows[r].tiled, one_tile[r]) << "row " << r;
    EXPECT_EQ(rows[1].untiled_row, 3u);  // rows 1 and 2 in the tile
    EXPECT_EQ(cut_batch_tiles(rows.data(), int(rows.size()), 0, tiles.data(), tiles.size()), 10u);  // no tiled kernel
    for (const BatchRow& r : rows) EXPECT_EQ(r.tiled, 0u);
    for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(rows[r].untiled_row, r);
    EXPECT_EQ(tiles[0].rows, 0u);
}

TEST_F(BatchTilesTest, StepAttentionMatchesSoftmax) {
    struct Case {
        uint32_t n_heads, n_kv, head_dim, window;
        float softcap;
    };
    size_t tiled_runs = 0;
    bool coopmat_ran = false;
    // The suite's device with each tiling, then the CPU backend (its flash_attention tiles, and
    // row by row).
    struct Run {
        bool cpu;
        const char* tuning;
    };
    for (const Run run : {Run{false, ""}, Run{false, "flash_coopmat=0"}, Run{false, "batch_flash=0"}, Run{true, ""},
                          Run{true, "batch_flash=0"}}) {
        const char* tuning = run.tuning;
        if (*tuning == 'f' && !device()->profile().gemm_coopmat) continue;  // the default device ran scalar tiles
        auto dev = run.cpu   ? Device::create("cpu", tuning)
                   : *tuning ? Device::create(test_selector(), tuning)
                             : device();
        for (const Case c : {Case{4, 2, 64, 0, 0.0f}, Case{2, 2, 128, 0, 0.0f}, Case{8, 2, 64, 40, 0.0f},
                             Case{4, 1, 128, 0, 5.0f}, Case{3, 1, 40, 0, 0.0f}}) {
            ModelConfig config = attention_config(int(c.n_heads), int(c.n_kv), int(c.head_dim));
            KvPool pool(dev, config, kContext, KvDType::kF16, int(std::size(kRuns)), 3 * int(std::size(kRuns)));
            const KvBindings cache = pool.bindings(0);
            const uint32_t tile_rows = kernels::batch_tile_rows(dev->profile(), cache, c.head_dim);
            // The default device runs flash_cm where it can; its scalar form runs under flash_coopmat=0.
            if (*tuning == 'f' && tile_rows != AKUNU_FLASH_ROWS) continue;
            tiled_runs += tile_rows > 0;
            coopmat_ran = coopmat_ran || tile_rows == AKUNU_FLASH_CM_ROWS;
            const std::vector<SeqKv> kv = fill_pool(pool, c.n_kv, c.head_dim);
            std::vector<BatchTile> tiles;
            const std::vector<uint8_t> st = step_bytes(tile_rows, tiles);
            Buffer step = dev->allocate(st.data(), st.size());
            Buffer tiles_buf = dev->allocate(tiles.data(), tiles.size() * sizeof(BatchTile));
            const size_t q_dim = size_t(c.n_heads) * c.head_dim;
            std::vector<float> q;
            Buffer qb = upload(dev, random_floats(kTableRows * q_dim, 47, -2.0f, 2.0f), DType::kF32, &q);
            Buffer out = poisoned(dev, kTableRows * q_dim, DType::kF32);
            const float scale = 1.0f / std::sqrt(float(c.head_dim));
            const kernels::AttentionShape shape{c.n_heads, c.n_kv, c.head_dim, kContext, c.window, scale, c.softcap};
            CommandList cl(dev);
            cl.begin();
            const Binding tiles_binding(tiles_buf);
            kernels::attention_rows(cl, &qb, cache, &out, &step,
                                    {shape, kTableRows, uint32_t(q_dim), uint32_t(q_dim), DType::kF32}, &tiles_binding);
            cl.end();
            cl.submit_and_wait();
            std::vector<float> want;
            for (const StepRun& r : kRuns)
                for (uint32_t i = 0; i < r.rows; ++i) {
                    const size_t row = want.size() / q_dim, pos = r.pos + i;
                    const size_t first = c.window > 0 && pos + 1 > c.window ? pos + 1 - c.window : 0;
                    want.resize(want.size() + q_dim);
                    for (size_t h = 0; h < c.n_heads; ++h)
                        reference_attention(&q[row * q_dim + h * c.head_dim], kv[r.seq].k, kv[r.seq].v,
                                            h / (c.n_heads / c.n_kv), kContext, c.head_dim, first, pos, scale,
                                            c.softcap, &want[row * q_dim + h * c.head_dim]);
                }
            // flash_cm rounds Q and the weights to halves (FlashAttentionMatchesSoftmax's bound).
            const float tol = tile_rows == AKUNU_FLASH_CM_ROWS ? 5e-3f : 1e-4f;
            expect_close(download(out, want.size(), DType::kF32), want, tol, tol,
                         std::string(run.cpu ? "cpu " : "") + tuning + " tile_rows=" + std::to_string(tile_rows) +
                             " heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv) +
                             " head_dim=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window));
        }
    }
    EXPECT_GT(tiled_runs, 0u) << "no case ran query tiles";
    if (!coopmat_ran) GTEST_SKIP() << "scalar tiles and attention_rows passed; flash_cm needs cooperative matrices";
}

}  // namespace akunu::test
