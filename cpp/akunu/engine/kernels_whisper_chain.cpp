// Launchers of Whisper's greedy-chain kernels (kernels.h, "Whisper greedy chains"): a step's
// decoder rows from the slots' states, and the ruled argmax of each row.
#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu::kernels {

using namespace launch;

void whisper_chain_rows(DispatchSink& s, const ChainRowsBindings& b, const WhisperChainRowsParams& p, size_t rows) {
    AKUNU_CHECK(p.slots > 0 && p.slots <= rows, "whisper_chain_rows: " + std::to_string(p.slots) +
                                                    " slots need as many rows, and the step has " +
                                                    std::to_string(rows));
    check_bytes(b.state, p.slots * sizeof(WhisperChainSlot), "whisper_chain_rows", "state");
    auto fits = [&](const Binding& bind, size_t width, const char* name) {
        check_fits(bind, p.slots * width, DType::kU32, "whisper_chain_rows", name);
    };
    fits(b.ids, 1, "ids");
    fits(b.pos, 1, "pos");
    fits(b.kv_rows, 1, "kv_rows");
    fits(b.self_seq, 2, "self_seq");
    fits(b.cross_seq, 2, "cross_seq");
    fits(b.head_rows, 1, "head_rows");
    fits(b.row_slot, 1, "row_slot");
    check_bytes(b.step, sizeof(StepState), "whisper_chain_rows", "step");
    check_bytes(b.head_step, sizeof(StepState), "whisper_chain_rows", "head_step");
    emit(s, "whisper_chain_rows", {},
         {b.state, b.ids, b.pos, b.kv_rows, b.self_seq, b.cross_seq, b.head_rows, b.row_slot, b.step, b.head_step}, p,
         Grid{1, 1});
}

void whisper_pick(DispatchSink& s, const Binding& logits, const Binding& row_slot, const Binding& head_step,
                  const Binding& masks, const Binding& state, const Binding& tokens, const Binding& logprobs,
                  const WhisperPickParams& p, size_t rows, size_t slots, uint32_t top_k) {
    AKUNU_CHECK(p.vocab > p.timestamp_begin && p.eot < p.timestamp_begin && p.no_timestamps < p.timestamp_begin,
                "whisper_pick: <|endoftext|> and <|notimestamps|> must come before timestamp_begin, which must be "
                "inside the vocabulary of " +
                    std::to_string(p.vocab));
    AKUNU_CHECK(p.mask_words * 32 >= p.vocab && p.step < p.steps,
                "whisper_pick: the masks must cover the vocabulary "
                "and the step must be inside the chain");
    AKUNU_CHECK(top_k <= 16 && top_k <= p.steps, "whisper_pick: top_k " + std::to_string(top_k) +
                                                     " must be at most 16 and at most the outputs' row of " +
                                                     std::to_string(p.steps));
    check_fits(logits, rows * p.vocab, DType::kF32, "whisper_pick", "logits");
    check_fits(row_slot, rows, DType::kU32, "whisper_pick", "row_slot");
    check_bytes(head_step, sizeof(StepState), "whisper_pick", "head_step");
    check_fits(masks, slots * 2 * p.mask_words, DType::kU32, "whisper_pick", "masks");
    check_bytes(state, slots * sizeof(WhisperChainSlot), "whisper_pick", "state");
    check_fits(tokens, slots * p.steps, DType::kU32, "whisper_pick", "tokens");
    check_fits(logprobs, slots * p.steps, DType::kF32, "whisper_pick", "logprobs");
    emit(s, "whisper_pick", {top_k}, {logits, row_slot, head_step, masks, state, tokens, logprobs}, p,
         Grid{checked_u32(rows, "whisper_pick: rows"), 1});
}

}  // namespace akunu::kernels
