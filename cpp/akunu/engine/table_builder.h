// The dispatch table of one pass, built by following its DecodePlan (plan.h): a layer loop that
// reads like the transformer's math (docs/architecture.md, "Dispatch table").
//
// A decode step (chained step k) embeds token_ids[k], reads StepState[k] and writes its sampled
// id to token_ids[k + 1], where step k + 1 embeds it. A prefill chunk embeds
// batch_token_ids[0 : n] at batch_step.pos; its buffers are the batch_* twins of the decode set,
// its matrix products GEMMs, its attention causal flash attention; it ends with the decode tail
// on its last row, so the next token is sampled as after a step.
//
// A part of a split model records its layers only, between its residual stream in and out
// (TablePass::split_in, split_out), each layer as the whole model's table records it.
#pragma once

#include <memory>
#include <vector>

#include "akunu/engine/kv_cache.h"
#include "akunu/engine/plan.h"
#include "akunu/engine/scratch.h"
#include "akunu/vulkan/dispatch.h"

namespace akunu {

struct LoadedModel;

// What one recorded table computes: a decode step or a prefill chunk of up to `rows` tokens.
struct TablePass {
    bool prefill;
    int rows;  // prefill: the chunk's capacity
    int step_index;  // decode: the chained step (StepState slot, token_ids slot)
    bool all_logits;  // prefill: the LM head over every row, into batch_logits
    // prefill: after layer taps[i] (ascending), h0 is copied to tap_buffer[i, 0 : rows, :]
    std::vector<int> taps = {};
    const Buffer* tap_buffer = nullptr;  // [taps.size(), rows, dim] f32
    // prefill with all_logits: a batched step (batch.h), rows of many sequences, each at its own
    // position in its own blocks of the pool (params.h BatchRow); attention_rows for attention,
    // and every row sampled with its sequence's sampler (sample_batch) instead of the tail.
    int batch_sequences = 0;
    // A part of a split model (LoadedModel::layers, split.h): a part after the first reads its
    // residual stream from split_in instead of embedding tokens, and a part before the last
    // writes it to split_out instead of the head: rows [rows, dim] f32, then, where a norm is
    // handed forward across the boundary (decode), its residual [dim] f32 and norm_sums.
    const Buffer* split_in = nullptr;
    const Buffer* split_out = nullptr;
    // prefill of one row: the matrix products are GEMVs, planned as a decode step's
    // (DecodePlan::gemv): a batch's one-row table (batch_pipeline.h).
    bool gemv = false;
    // prefill: the fewest rows a step of this table runs (a batch's full table, whose steps of
    // fewer rows run its short and few-row tables): no GEMM row window below it is recorded.
    int min_rows = 0;
};

// The plan of `pass` for a model with this scratch and cache.
DecodePlan plan_for(const LoadedModel& model, const ScratchBuffers& scratch, const KvSource& kv, const TablePass& pass);

std::unique_ptr<DispatchTable> build_table(const LoadedModel& model, const ScratchBuffers& scratch, const KvSource& kv,
                                           const DecodePlan& plan, const TablePass& pass);

}  // namespace akunu
