// BatchPipeline: where a batch's step runs (batch.h, docs/batch.md). On one device, one table of
// the whole model. On a model split by layers across devices (split.h), each part runs a table
// of its layers for all the step's rows and hands the rows' residual stream ([rows, dim] f32,
// through host-visible memory) to the next part; the last part samples. The parts' tables read
// their layers of the one KV pool (kv_pool.h: each device holds its layers' rows of every
// block, the block tables are shared).
//
// Micro-batches: a split step's rows run as two halves, so that while a part runs the first
// half's layers the part before it runs the second half's (both devices' submissions in
// flight: pipeline parallelism). A stage is one part's work on one micro-batch: its scratch, its
// tables recorded once, and its residual stream in and out. The halves go through the parts in a
// wavefront: at tick t, micro-batch k runs on part t - k. Each micro-batch's rows are sampled
// with their sequences' samplers (keyed by seed and position), so results do not depend on how
// the rows are cut.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "akunu/engine/kv_pool.h"
#include "akunu/engine/profile.h"
#include "akunu/engine/scratch.h"
#include "akunu/vulkan/command_list.h"
#include "akunu/vulkan/dispatch.h"
#include "params.h"

namespace akunu {

struct LoadedModel;

// A step's query tiles (params.h BatchTile): the rows marked tiled (a prompt's piece of 2 or
// more rows) cut into tiles of up to tile_rows rows of one sequence at consecutive positions, at
// most `capacity` of them. A piece's tiles are the same whether it runs whole or cut between two
// micro-batches, so the rows' results are too. Rows that find no room get tiled = 0 (attention_rows
// attends them); the entries of `tiles` past the step's get rows 0. tile_rows 0 (no tiled kernel,
// kernels::batch_tile_rows): no tiles, every row unmarked. Then the rows left unmarked are listed
// in the rows' untiled_row entries, in row order, and their count returned.
uint32_t cut_batch_tiles(BatchRow* rows, int n, uint32_t tile_rows, BatchTile* tiles, size_t capacity);

class BatchPipeline {
public:
    // `parts`: the model's parts in layer order (one: a model on one device). `microbatches`: the
    // micro-batches of a split step, 1 or 2, or -1 (auto): 2 for steps of enough rows (a model on
    // one device runs 1).
    BatchPipeline(const std::vector<std::shared_ptr<const LoadedModel>>& parts, const KvPool& pool, int rows,
                  int max_sequences, int microbatches);

    int rows() const { return rows_; }
    int microbatches() const { return int(lanes_.size()); }  // the most a step runs in
    // Runs a step of n rows (n <= rows()): token ids [n], each row's sequence, position and its
    // sequence's positions this step [n] (BatchRow), and the token each row scores [n]
    // (AKUNU_NO_TARGET for none).
    void run(const uint32_t* ids, const BatchRow* rows, const uint32_t* targets, int n);
    // After run(): row r's sampled token and its log-probability, its target's log-probability
    // and whether that is the row's argmax, and its logits [vocab] (read, staged where the
    // host reads the device's memory uncached).
    uint32_t sampled(int row) const;
    float logprob(int row) const;
    float target_logprob(int row) const;
    bool target_is_argmax(int row) const;
    void read_logits(int row, float* out) const;
    // Writes a sequence's sampler where its rows are sampled.
    void set_sampler(int seq, const SamplerState& sampler);

    // The first micro-batch's last part: its table, its short table (nullptr where there is
    // none) and its scratch.
    const DispatchTable& table() const;
    const DispatchTable* short_table() const;
    int short_rows() const { return last().short_rows; }
    const ScratchBuffers& scratch() const { return *last().scratch; }
    size_t scratch_bytes() const;  // every stage's scratch and hand-off buffers
    // Each command's device time in a replay of the last step's tables (the first micro-batch's,
    // part by part): the rows and KV writes of that step again, which leave the cache as it was.
    std::vector<ProfileRow> profile() const;

private:
    struct StepTable {
        std::unique_ptr<DispatchTable> table;
        std::unique_ptr<CommandList> cl;
    };
    struct Stage {
        std::shared_ptr<const LoadedModel> part;
        int rows = 0, short_rows = 0;
        uint32_t tile_rows = 0;  // the query tiles' rows of its attention (kernels::batch_tile_rows); 0: none
        uint32_t latest = 0;  // the step's latest position among its rows (its tables follow it)
        uint32_t untiled = 0;  // the step's rows that no query tile takes (BatchRow::untiled_row)
        std::unique_ptr<ScratchBuffers> scratch;
        // The residual stream [rows, dim] f32 from the part before, to the part after (empty
        // buffers where there is none). On the heap: the tables bind them by address, and a
        // Stage moves.
        std::unique_ptr<Buffer> in, out;
        // [0] up to rows; [1] (where short_rows > 0) up to short_rows.
        StepTable tables[2];
        // few[r - 1]: a step of exactly r rows (few_rows). few[0]'s products are GEMVs
        // (DecodePlan::gemv): one sequence's decode row. few[1..3] (where the weights take the
        // tile GEMV of several rows, kernels::gemm_tile_rows) record that kernel for r rows of x
        // and no other row window beside it.
        std::vector<StepTable> few;
    };
    Stage make_stage(const std::shared_ptr<const LoadedModel>& part, const KvPool& pool, int rows,
                     int max_sequences) const;
    StepTable record_table(const Stage& s, const KvPool& pool, int rows, size_t counts_slot, int max_sequences,
                           bool one_row, int min_rows = 0) const;
    void write_rows(Stage& s, const uint32_t* ids, const BatchRow* rows, const uint32_t* targets, int n);
    CommandList& submit(Stage& s, int n, int step_rows);
    // The table a stage runs for its n rows of a step of step_rows: a few-row table by the whole
    // step's rows, so that a step cut into micro-batches runs each row as the whole step would
    // (the GEMM tiles sum a row alike whatever rows share them; a GEMV sums it otherwise).
    static const StepTable& table_for(const Stage& s, int n, int step_rows);
    static int few_rows(const LoadedModel& b, int rows);
    const Stage& last() const { return lanes_[0].back(); }
    // The stage and row within it that holds row r of the last step (its last part).
    std::pair<const Stage*, size_t> locate(int row) const;

    int rows_ = 0, vocab_ = 0;
    std::vector<std::vector<Stage>> lanes_;  // [micro-batch][part]
    bool auto_ = false;  // split_microbatches auto: two micro-batches only for steps of enough rows
    int cut_ = 0;  // the last step's first row of micro-batch 1
    int last_rows_ = 0;  // the last step's rows; 0 before the first
};

}  // namespace akunu
