// Batch: many sequences decoded together over one model's weights (docs/batch.md).
//
// A batch owns a KV block pool shared by up to max_sequences sequences (kv_pool.h), its own
// scratch and its dispatch tables, recorded once: a batched step of up to rows() rows, each row a
// token of some sequence at that sequence's position. The step's GEMMs run over all rows (the
// weights are read once for every sequence), attention reads each row's own sequence's blocks
// (attention_rows), and every row's logits are sampled with its sequence's sampler. What changes
// from step to step is data only: the token ids, a BatchRow (sequence, position) per row, the
// samplers and the block tables. So sequences join and leave between steps, and a prompt's rows
// share a step with other sequences' decode rows (chunked prefill), with nothing re-recorded.
// Where the device runs short GEMM tiles, a second table covers steps of up to that many rows
// (decode steps, mostly): it holds only the short GEMMs, where the full table also dispatches
// the wide tiles, the weights' dequantization and the f16 GEMMs that such a step leaves idle.
//
// A model split by layers across devices (split.h) batches the same way: each device holds its
// layers' part of the pool and runs its layers for the step's rows, as micro-batches in flight
// (batch_pipeline.h).
//
// A sequence holds pending tokens: its prompt not yet run, then the token it sampled last. Each
// step() takes the pending tokens of the sequences in turn until the rows run out (decode rows
// first, so a long prompt does not stall the others); a sequence whose pending tokens all ran
// samples its next token, which becomes its one pending token.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "akunu/engine/batch_pipeline.h"
#include "akunu/engine/kv_pool.h"
#include "akunu/engine/scratch.h"
#include "akunu/vulkan/dispatch.h"
#include "params.h"

namespace akunu {

class Model;
struct LoadedModel;

struct BatchOptions {
    int max_sequences = 8;
    // rows per step; 0: the model's prefill chunk (at least 128, fewer where the decode rows'
    // split attention would not fit them), at least max_sequences (clipped so the logits fit)
    int rows = 0;
    int blocks = 0;  // pool blocks of AKUNU_KV_BLOCK positions; 0: enough for every sequence's context
    bool prefix_sharing = true;  // sequences share the full blocks of a common prefix
};

// The rows a scoring batch's steps take by default (0: a Batch's default): on GPUs twice the
// prefill chunk, since a step of prompt rows reads (and dequantizes) every weight once and
// scoring has no decode rows to keep waiting (bench/NOTES.md, "score_batch in steps of twice
// the prefill chunk"). The Batch clips it so that the step's logits fit.
int scoring_rows(const Model& model);

// A token a step sampled for a sequence.
struct BatchToken {
    int seq;
    int token;
    float logprob;  // under the unfiltered distribution
};

class Batch {
public:
    Batch(const Model& model, const BatchOptions& options);

    // A new sequence that runs `ids` (at least one token) and then samples with `sampler`.
    // Throws, changing nothing, for an empty prompt, an id outside the vocabulary, a prompt
    // longer than the context, or when all max_sequences are in use. With `score`, each step
    // also records the log-probability of each prompt token after the first (scores()).
    int add(const std::vector<int>& ids, const SamplerState& sampler, bool score = false);
    // A new sequence holding `seq`'s cache by sharing its blocks (copy-on-write) and its pending
    // tokens, with its own sampler.
    int fork(int seq, const SamplerState& sampler);
    void remove(int seq);  // its blocks go back to the pool
    // A new sequence with an empty cache and nothing pending: its cache is written with
    // write_kv() and advance(), and extend() gives it tokens to run.
    int add_empty(const SamplerState& sampler);
    // Appends token ids to run after the sequence's pending tokens.
    void extend(int seq, const std::vector<int>& ids);
    // Replaces the tokens waiting to run (the token it sampled last, for one); with `score`
    // their rows record scores, as add(score = true) does (scores() restart if it did not score).
    // A forked sequence given a continuation this way scores it after the shared prefix.
    void set_pending(int seq, const std::vector<int>& ids, bool score);
    // Writes f16 rows [n_kv, n, head_dim] into positions [from, from + n) of one side of one
    // layer of the sequence's cache (an f16 pool), taking blocks for them as a step would.
    void write_kv(int seq, int layer, bool values, int from, int n, const uint16_t* data);
    // Counts n more positions as held by the sequence's cache (rows written with write_kv); its
    // blocks are then no longer offered for prefix sharing.
    void advance(int seq, int n);
    void set_sampler(int seq, const SamplerState& sampler);

    // Runs one batched step; returns the tokens sampled (one per sequence whose pending tokens
    // all ran). Throws, changing nothing, when the pool lacks the blocks the step needs; with
    // `wait`, the sequences whose blocks do not fit wait for a later step instead (it throws
    // only when none fits).
    std::vector<BatchToken> step(bool wait = false);

    bool active(int seq) const;
    int max_sequences() const { return pool_->sequences(); }
    int rows() const { return rows_; }
    int length(int seq) const;  // positions in its cache
    int pending(int seq) const;  // tokens waiting to run
    // The logits [vocab] of the row that sampled the sequence's last token (the last step).
    std::vector<float> logits(int seq) const;
    // With add(score = true): log p(ids[i + 1] | ids[0..i]) for the prompt rows run so far.
    const std::vector<float>& scores(int seq) const;
    // With add(score = true): whether each scored token was its row's argmax (as scores()).
    const std::vector<uint8_t>& score_greedy(int seq) const;
    const KvPool& pool() const { return *pool_; }
    const std::vector<int>& block_table(int seq) const;
    // The step's table (a split model's: its last part's, of the first micro-batch).
    const DispatchTable& table() const { return pipeline_->table(); }
    // The table of steps of up to short_rows() rows (nullptr where there is none).
    const DispatchTable* short_table() const { return pipeline_->short_table(); }
    int short_rows() const { return pipeline_->short_rows(); }
    const ScratchBuffers& scratch() const { return pipeline_->scratch(); }
    size_t scratch_bytes() const { return pipeline_->scratch_bytes(); }
    int microbatches() const { return pipeline_->microbatches(); }
    // Each command's device time in a replay of the last step (BatchPipeline::profile).
    std::vector<ProfileRow> profile() const { return pipeline_->profile(); }

private:
    struct Seq {
        bool active = false;
        std::vector<int> pending;  // not yet in the cache
        std::vector<int> tokens;  // in the cache, position order
        SamplerState sampler{};
        bool score = false;
        std::vector<float> scores;
        std::vector<uint8_t> greedy;  // per score: the token was the row's argmax
        bool written = false;  // rows came from write_kv: tokens no longer describe the cache
        int last_row = -1;  // its sampling row in the last step
        uint64_t hash = 0;  // chain hash of its full blocks so far
        int hashed = 0;  // its blocks that hash covers
    };
    struct Piece {
        int seq, first_row, n;
    };
    Seq& checked(int seq);
    const Seq& checked(int seq) const;
    int free_slot() const;
    void check_ids(const std::vector<int>& ids) const;
    void share_prefix(int seq, const std::vector<int>& ids);
    std::vector<Piece> plan_step() const;
    void finish_piece(const Piece& piece, std::vector<BatchToken>& out);
    uint32_t score_target(int seq, int pos) const;
    void publish_blocks(int seq);

    std::shared_ptr<const LoadedModel> base_;
    int rows_ = 0, vocab_ = 0;
    bool prefix_sharing_ = true;
    std::unique_ptr<KvPool> pool_;
    std::unique_ptr<BatchPipeline> pipeline_;
    std::vector<Seq> seqs_;
    std::vector<int> step_copies_;  // per pool block: the copies a step's writes plan (blocks_needed)
    uint64_t step_count_ = 0;
};

}  // namespace akunu
