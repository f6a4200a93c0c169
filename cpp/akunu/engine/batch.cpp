// Batch: sequences joining and leaving, the rows of each step, and what a step leaves behind.
#include "akunu/engine/batch.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "akunu/core/error.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/model.h"
#include "akunu/engine/memory_plan.h"

namespace akunu {

namespace {

// The chain hash of one full block of tokens after the blocks before it (never 0).
uint64_t block_hash(uint64_t before, const int* tokens) {
    uint64_t h = before ^ 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < AKUNU_KV_BLOCK; ++i) {
        h ^= uint64_t(uint32_t(tokens[i]));
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

// Rows a step by default: the model's prefill chunk (a step reads every weight once, so a
// prompt's steps of more rows read fewer a token), at least 128 and max_sequences, halved while
// the decode rows' split attention, which the device runs at 128 rows, would not fit its
// partials' budget for that many. The chunk as asked for, not clipped to one sequence's context:
// a step holds the rows of many sequences.
int default_rows(const BatchOptions& o, const LoadedModel& b) {
    if (o.rows > 0) return o.rows;
    const ModelConfig& c = b.config;
    const auto split = [&](int rows) {
        return kernels::batch_row_split(b.device->profile(), uint32_t(rows), uint32_t(c.n_heads), uint32_t(c.head_dim),
                                        uint32_t(b.context));
    };
    int rows = std::max(b.batch_chunk, 128);
    while (rows > 128 && split(128) && !split(rows)) rows /= 2;
    return std::max(rows, o.max_sequences);
}

}  // namespace

int scoring_rows(const Model& model) {
    const LoadedModel& b = *model.loaded();
    if (b.device->profile().type == DeviceType::kCpu) return 0;
    return std::min(2 * std::max(b.batch_chunk, 128), 4096);
}

Batch::Batch(const Model& model, const BatchOptions& o) : base_(model.loaded()), prefix_sharing_(o.prefix_sharing) {
    const LoadedModel& b = *base_;
    AKUNU_CHECK(o.max_sequences >= 1 && o.max_sequences <= 4096,
                "max_sequences must be in [1, 4096], not " + std::to_string(o.max_sequences));
    AKUNU_CHECK(o.rows >= 0 && o.blocks >= 0, "a batch's rows and blocks must not be negative");
    // The model's parts in layer order (one, unless it is split across devices).
    std::vector<std::shared_ptr<const LoadedModel>> parts;
    std::vector<KvPoolPart> pool_parts;
    for (const Model* p : model.parts()) {
        parts.push_back(p->loaded());
        pool_parts.push_back({p->loaded()->device, p->loaded()->layers});
    }
    const int per_seq = (b.context + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK;
    pool_ = std::make_unique<KvPool>(pool_parts, b.config, b.context, b.plan.options.kv_dtype, o.max_sequences,
                                     o.blocks > 0 ? o.blocks : o.max_sequences * per_seq, b.plan.kv.recent);
    // The step's logits, [rows, vocab] f32, are bounded as a prefill chunk's all-position logits.
    const int want = std::min(default_rows(o, b), 4096);
    rows_ = prefill_logit_rows(b.config, want, kBatchLogitBytes);
    vocab_ = b.config.vocab_size;
    pipeline_ = std::make_unique<BatchPipeline>(parts, *pool_, rows_, o.max_sequences,
                                                parts.front()->device->profile().tuning.split_microbatches);
    seqs_.resize(size_t(o.max_sequences));
    step_copies_.assign(size_t(pool_->blocks_total()), 0);
}

Batch::Seq& Batch::checked(int seq) { return const_cast<Seq&>(static_cast<const Batch*>(this)->checked(seq)); }

const Batch::Seq& Batch::checked(int seq) const {
    AKUNU_CHECK(seq >= 0 && seq < int(seqs_.size()) && seqs_[size_t(seq)].active,
                "sequence " + std::to_string(seq) + " is not in the batch");
    return seqs_[size_t(seq)];
}

bool Batch::active(int seq) const { return seq >= 0 && seq < int(seqs_.size()) && seqs_[size_t(seq)].active; }
int Batch::length(int seq) const {
    checked(seq);
    return pool_->length(seq);
}
int Batch::pending(int seq) const { return int(checked(seq).pending.size()); }
const std::vector<float>& Batch::scores(int seq) const { return checked(seq).scores; }
const std::vector<uint8_t>& Batch::score_greedy(int seq) const { return checked(seq).greedy; }
const std::vector<int>& Batch::block_table(int seq) const {
    checked(seq);
    return pool_->block_table(seq);
}

int Batch::free_slot() const {
    for (size_t s = 0; s < seqs_.size(); ++s)
        if (!seqs_[s].active) return int(s);
    throw Error("the batch holds its max_sequences (" + std::to_string(seqs_.size()) +
                ") sequences; remove one first, or make the batch with a larger max_sequences");
}

int Batch::add(const std::vector<int>& ids, const SamplerState& sampler, bool score) {
    AKUNU_CHECK(!ids.empty(), "a sequence needs at least one token");
    check_ids(ids);
    AKUNU_CHECK(int(ids.size()) <= pool_->context(), "a prompt of " + std::to_string(ids.size()) +
                                                         " tokens does not fit the context of " +
                                                         std::to_string(pool_->context()));
    check_sampler(sampler);
    const int seq = free_slot();
    Seq& s = seqs_[size_t(seq)];
    s = Seq{};
    s.active = true;
    s.sampler = sampler;
    s.score = score;
    pipeline_->set_sampler(seq, sampler);
    s.pending = ids;
    if (prefix_sharing_ && !score) share_prefix(seq, ids);
    return seq;
}

// Adopts the pool's blocks that hold this prompt's leading full blocks, leaving at least the
// last token to run (its logits sample the first new token).
void Batch::share_prefix(int seq, const std::vector<int>& ids) {
    Seq& s = seqs_[size_t(seq)];
    size_t j = 0;
    for (; (j + 1) * AKUNU_KV_BLOCK < ids.size(); ++j) {
        const uint64_t h = block_hash(s.hash, ids.data() + j * AKUNU_KV_BLOCK);
        const int block = pool_->find_block(h);
        if (block < 0) break;
        pool_->adopt(seq, block);
        s.hash = h;
    }
    const size_t n = j * AKUNU_KV_BLOCK;
    s.hashed = int(j);
    s.tokens.assign(ids.begin(), ids.begin() + long(n));
    s.pending.erase(s.pending.begin(), s.pending.begin() + long(n));
    pool_->set_length(seq, int(n));
    pool_->adopted(seq);
}

int Batch::fork(int from, const SamplerState& sampler) {
    const Seq& src = checked(from);
    check_sampler(sampler);
    const int seq = free_slot();
    Seq copy = src;
    copy.sampler = sampler;
    copy.score = false;
    copy.scores.clear();
    copy.greedy.clear();
    copy.last_row = -1;
    pool_->share(seq, from, pool_->length(from));
    seqs_[size_t(seq)] = std::move(copy);
    pipeline_->set_sampler(seq, sampler);
    return seq;
}

void Batch::remove(int seq) {
    checked(seq);
    pool_->release(seq);
    seqs_[size_t(seq)] = Seq{};
    // An empty batch plans its next steps as a new one does (plan_step's turn starts again), so
    // that a batch kept for later calls gives what a new one gives (akunu.batch.KeptBatches).
    if (std::none_of(seqs_.begin(), seqs_.end(), [](const Seq& s) { return s.active; })) step_count_ = 0;
}

int Batch::add_empty(const SamplerState& sampler) {
    check_sampler(sampler);
    const int seq = free_slot();
    seqs_[size_t(seq)] = Seq{};
    seqs_[size_t(seq)].active = true;
    set_sampler(seq, sampler);
    return seq;
}

void Batch::check_ids(const std::vector<int>& ids) const {
    for (size_t i = 0; i < ids.size(); ++i)
        AKUNU_CHECK(ids[i] >= 0 && ids[i] < vocab_, "token id " + std::to_string(ids[i]) + " at index " +
                                                        std::to_string(i) + " is out of range for a vocabulary of " +
                                                        std::to_string(vocab_));
}

void Batch::extend(int seq, const std::vector<int>& ids) {
    Seq& s = checked(seq);
    set_pending(
        seq,
        [&] {
            std::vector<int> all = s.pending;
            all.insert(all.end(), ids.begin(), ids.end());
            return all;
        }(),
        s.score);
}

void Batch::set_pending(int seq, const std::vector<int>& ids, bool score) {
    Seq& s = checked(seq);
    check_ids(ids);
    AKUNU_CHECK(pool_->length(seq) + int(ids.size()) <= pool_->context(),
                "sequence " + std::to_string(seq) + ": " + std::to_string(ids.size()) + " tokens to run after its " +
                    std::to_string(pool_->length(seq)) + " do not fit the context of " +
                    std::to_string(pool_->context()));
    s.pending = ids;
    if (score && !s.score) s.scores.clear(), s.greedy.clear();
    s.score = score;
}

void Batch::write_kv(int seq, int layer, bool values, int from, int n, const uint16_t* data) {
    Seq& s = checked(seq);
    AKUNU_CHECK(layer >= 0 && layer < pool_->n_layers(), "layer " + std::to_string(layer) + " is out of range (0 to " +
                                                             std::to_string(pool_->n_layers() - 1) + ")");
    AKUNU_CHECK(from >= 0 && n >= 0, "KV rows from position " + std::to_string(from) + ", " + std::to_string(n) +
                                         " of them: both must be >= 0");
    AKUNU_CHECK(pool_->dtype() == KvDType::kF16, "KV rows are written into an f16 cache only; this one is " +
                                                     std::string(kv_dtype_name(pool_->dtype())) +
                                                     " (make the model with kv_dtype='f16')");
    pool_->prepare_write(seq, from, from + n);
    pool_->write_side(seq, layer, values, from, n, data);
    s.written = true;
}

void Batch::advance(int seq, int n) {
    Seq& s = checked(seq);
    const int length = pool_->length(seq);
    AKUNU_CHECK(n >= 0, "advance by " + std::to_string(n) + ": expected n >= 0");
    pool_->prepare_write(seq, length, length + n);
    s.tokens.insert(s.tokens.end(), size_t(n), -1);  // positions without a token of their own
    s.written = true;
    pool_->set_length(seq, length + n);
}

void Batch::set_sampler(int seq, const SamplerState& sampler) {
    check_sampler(sampler);
    checked(seq).sampler = sampler;
    pipeline_->set_sampler(seq, sampler);
}

// The step's pieces: the sequences with one pending token (decode rows) first, then pieces of
// prompts, in turn from a place that moves each step, until the rows run out.
std::vector<Batch::Piece> Batch::plan_step() const {
    std::vector<Piece> pieces;
    int left = rows_;
    const size_t n = seqs_.size(), start = size_t(step_count_ % n);
    for (const bool decode : {true, false})
        for (size_t i = 0; i < n && left > 0; ++i) {
            const size_t seq = (start + i) % n;
            const Seq& s = seqs_[seq];
            if (!s.active || s.pending.empty() || (s.pending.size() == 1) != decode) continue;
            const int room = pool_->context() - pool_->length(int(seq));
            int take = std::min({int(s.pending.size()), left, room});
            // A recent window's shared blocks keep their tails from the rings, which hold them
            // only where a prompt piece ends at the block's end (KvPool::publish).
            if (!decode && prefix_sharing_ && pool_->recent_window() > 0)
                take = std::min(take, AKUNU_KV_BLOCK - pool_->length(int(seq)) % AKUNU_KV_BLOCK);
            if (take <= 0) continue;
            pieces.push_back({int(seq), rows_ - left, take});
            left -= take;
        }
    return pieces;
}

std::vector<BatchToken> Batch::step(bool wait) {
    std::vector<Piece> pieces = plan_step();
    // Nothing can run, yet a sequence waits to: its cache is full. Steps would return nothing
    // for it forever (a loop that waits for its next token would never end).
    for (size_t seq = 0; pieces.empty() && seq < seqs_.size(); ++seq)
        AKUNU_CHECK(!seqs_[seq].active || seqs_[seq].pending.empty(),
                    "sequence " + std::to_string(seq) + " fills the context of " + std::to_string(pool_->context()) +
                        " positions: its last sampled token cannot run; remove the sequence");
    for (Seq& s : seqs_) s.last_row = -1;
    if (pieces.empty()) return {};
    int need = 0;
    std::vector<Piece> fitting;
    std::fill(step_copies_.begin(), step_copies_.end(), 0);
    for (const Piece& p : pieces) {
        const int more = pool_->blocks_needed(p.seq, pool_->length(p.seq), pool_->length(p.seq) + p.n, &step_copies_);
        need += more;
        if (!wait || need > pool_->blocks_free()) continue;
        fitting.push_back({p.seq, fitting.empty() ? 0 : fitting.back().first_row + fitting.back().n, p.n});
    }
    if (wait && !fitting.empty()) pieces = fitting, need = 0;  // the others wait for blocks
    AKUNU_CHECK(need <= pool_->blocks_free(),
                "the KV block pool is exhausted: this step needs " + std::to_string(need) + " more block(s) of " +
                    std::to_string(AKUNU_KV_BLOCK) + " positions but " + std::to_string(pool_->blocks_free()) + " of " +
                    std::to_string(pool_->blocks_total()) +
                    " are free; remove a sequence, or make the batch with more blocks");
    std::vector<uint32_t> ids, targets;
    std::vector<BatchRow> rows;
    for (const Piece& p : pieces) {
        const int first = pool_->length(p.seq);
        pool_->prepare_write(p.seq, first, first + p.n);
        for (int i = 0; i < p.n; ++i) {
            ids.push_back(uint32_t(seqs_[size_t(p.seq)].pending[size_t(i)]));
            // A prompt's piece attends in query tiles (kernels::attention_rows), a decode row by itself.
            rows.push_back(BatchRow{uint32_t(p.seq), uint32_t(first + i), uint32_t(first), uint32_t(first + p.n),
                                    p.n > 1 ? 1u : 0u, 0, 0, 0});
            targets.push_back(score_target(p.seq, first + i));
        }
    }
    pipeline_->run(ids.data(), rows.data(), targets.data(), int(ids.size()));
    ++step_count_;
    std::vector<BatchToken> out;
    for (const Piece& p : pieces) finish_piece(p, out);
    return out;
}

// The token a scored sequence's row at `pos` scores: the one after it, when the sequence has it
// (its prompt's tokens, written or pending); else none.
uint32_t Batch::score_target(int seq, int pos) const {
    const Seq& s = seqs_[size_t(seq)];
    const size_t next = size_t(pos) + 1;
    if (!s.score || next >= s.tokens.size() + s.pending.size()) return AKUNU_NO_TARGET;
    return uint32_t(next < s.tokens.size() ? s.tokens[next] : s.pending[next - s.tokens.size()]);
}

// After the step: the piece's tokens are in the cache; a prompt's rows score the tokens after
// them; a sequence with nothing pending takes the token its last row sampled.
void Batch::finish_piece(const Piece& p, std::vector<BatchToken>& out) {
    Seq& s = seqs_[size_t(p.seq)];
    const int first = pool_->length(p.seq);
    s.tokens.insert(s.tokens.end(), s.pending.begin(), s.pending.begin() + p.n);
    s.pending.erase(s.pending.begin(), s.pending.begin() + p.n);
    pool_->set_length(p.seq, first + p.n);
    // The sampler scored each prompt row's target on the device (moving pending ids into tokens
    // leaves score_target's answer as it was).
    if (s.score)
        for (int i = 0; i < p.n; ++i) {
            if (score_target(p.seq, first + i) == AKUNU_NO_TARGET) break;
            s.scores.push_back(pipeline_->target_logprob(p.first_row + i));
            s.greedy.push_back(pipeline_->target_is_argmax(p.first_row + i) ? 1 : 0);
        }
    if (s.pending.empty()) {
        const int row = p.first_row + p.n - 1;
        const int token = int(pipeline_->sampled(row));
        const float lp = pipeline_->logprob(row);
        s.pending.push_back(token);
        s.last_row = row;
        out.push_back({p.seq, token, lp});
    }
    if (prefix_sharing_ && !s.written) publish_blocks(p.seq);
}

// Records the hashes of the sequence's newly full blocks, for prefix sharing.
void Batch::publish_blocks(int seq) {
    Seq& s = seqs_[size_t(seq)];
    for (size_t j = size_t(s.hashed); (j + 1) * AKUNU_KV_BLOCK <= s.tokens.size(); ++j) {
        s.hash = block_hash(s.hash, s.tokens.data() + j * AKUNU_KV_BLOCK);
        pool_->publish(seq, int(j), s.hash);
        s.hashed = int(j + 1);
    }
}

std::vector<float> Batch::logits(int seq) const {
    const Seq& s = checked(seq);
    AKUNU_CHECK(s.last_row >= 0, "sequence " + std::to_string(seq) + " sampled no token in the last step");
    std::vector<float> out(static_cast<size_t>(vocab_));
    pipeline_->read_logits(s.last_row, out.data());
    return out;
}

}  // namespace akunu
