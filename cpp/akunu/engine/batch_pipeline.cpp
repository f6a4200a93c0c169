// BatchPipeline: a batch's stages (a part of the model for a micro-batch of the step's rows),
// their tables, and the wavefront that runs them.
#include "akunu/engine/batch_pipeline.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "akunu/core/error.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/model.h"
#include "akunu/engine/table_builder.h"

namespace akunu {

namespace {

// With split_microbatches on auto, a step of fewer rows runs whole: a decode step reads every
// weight once whatever its rows, so halves of a few rows would read the weights twice for an
// overlap that saves little.
constexpr int kMicrobatchRowsAuto = 16;

// Steps of up to this many rows run a table of exactly their rows: the tile GEMV of several rows
// multiplies every row of its window, so a step of three rows in the four-row window pays for
// four (bench/NOTES.md, "The few-row tile GEMV's rows fixed by specialization").
constexpr int kFewRowsMost = 4;

// Copies the first `bytes` of one stage's residual stream into the next one's, both in host
// memory (make_stage): one copy between the mappings, nothing allocated.
void hand_over(const Buffer& from, Buffer& to, size_t bytes) {
    AKUNU_CHECK(from.contents() && to.contents(), "a split step's hand-off needs its residual streams mapped");
    std::memcpy(to.contents(), from.contents(), bytes);
}

}  // namespace

uint32_t cut_batch_tiles(BatchRow* rows, int n, uint32_t tile_rows, BatchTile* tiles, size_t capacity) {
    size_t count = 0;
    const size_t room = tile_rows > 0 ? capacity : 0;  // no tiled kernel: every row goes to attention_rows
    for (int r = 0; r < n;) {
        int end = r + 1;  // the run: marked rows of one sequence at consecutive positions
        while (rows[r].tiled && end < n && rows[end].tiled && rows[end].seq == rows[r].seq &&
               rows[end].pos == rows[end - 1].pos + 1)
            ++end;
        for (int first = r, marked = rows[r].tiled; marked && first < end;) {
            const int take = std::min(end - first, tile_rows > 0 ? int(tile_rows) : n);
            const bool placed = count < room;
            if (placed) tiles[count++] = BatchTile{uint32_t(first), uint32_t(take)};
            for (int i = first; i < first + take; ++i) rows[i].tiled = placed ? 1 : 0;
            first += take;
        }
        r = end;
    }
    std::fill(tiles + count, tiles + capacity, BatchTile{0, 0});
    uint32_t untiled = 0;
    for (int r = 0; r < n; ++r)
        if (!rows[r].tiled) rows[untiled++].untiled_row = uint32_t(r);
    return untiled;
}

BatchPipeline::BatchPipeline(const std::vector<std::shared_ptr<const LoadedModel>>& parts, const KvPool& pool, int rows,
                             int max_sequences, int microbatches)
    : rows_(rows), vocab_(parts.back()->config.vocab_size) {
    AKUNU_CHECK(microbatches == -1 || microbatches == 1 || microbatches == 2,
                "tuning key 'split_microbatches' takes 1 or 2 (or auto), not " + std::to_string(microbatches));
    // A model on one device gains nothing by cutting its rows: one micro-batch.
    const int lanes = parts.size() > 1 && rows > 1 && microbatches != 1 ? 2 : 1;
    auto_ = microbatches < 0;
    // With two micro-batches a step of n rows runs ceil(n / 2) and floor(n / 2) of them.
    const int lane_rows = (rows + lanes - 1) / lanes;
    for (int k = 0; k < lanes; ++k) {
        lanes_.emplace_back();
        for (const auto& part : parts) lanes_.back().push_back(make_stage(part, pool, lane_rows, max_sequences));
    }
}

// One part's scratch, residual stream in and out, and tables for up to `rows` rows.
BatchPipeline::Stage BatchPipeline::make_stage(const std::shared_ptr<const LoadedModel>& part, const KvPool& pool,
                                               int rows, int max_sequences) const {
    const LoadedModel& b = *part;
    Stage s;
    s.part = part;
    s.rows = rows;
    s.scratch = std::make_unique<ScratchBuffers>(b.device, b.config, b.context, 1, rows, b.plan.options.prefill_dequant,
                                                 max_sequences);
    fill_rope_tables(b, *s.scratch, 0, b.context);
    s.tile_rows =
        kernels::batch_tile_rows(b.device->profile(), pool.bindings(b.layers.first), uint32_t(b.config.head_dim));
    const size_t stream = size_t(rows) * size_t(b.config.dim) * 4;
    s.in = std::make_unique<Buffer>();
    s.out = std::make_unique<Buffer>();
    if (!b.layers.embeds()) *s.in = Buffer::allocate(b.device, stream, Residency::kHost);
    if (!b.layers.heads(b.config.n_layers)) *s.out = Buffer::allocate(b.device, stream, Residency::kHost);
    const int short_rows = int(b.device->profile().gemm_short_rows);
    if (short_rows > 0 && short_rows < rows) s.short_rows = short_rows;
    // Steps of up to short_rows rows run the short table: the full one records no GEMM row
    // window below it.
    s.tables[0] = record_table(s, pool, rows, 0, max_sequences, false, s.short_rows + 1);
    if (s.short_rows > 0) s.tables[1] = record_table(s, pool, short_rows, 1, max_sequences, false);
    // The few-row tables share the short table's counts: a stage runs one table at a time, and
    // each submission writes its table's counts first (submit).
    s.few.push_back(record_table(s, pool, 1, 1, max_sequences, true));
    for (int r = 2; r <= few_rows(b, rows); ++r) s.few.push_back(record_table(s, pool, r, 1, max_sequences, false));
    return s;
}

// The largest step with a table of its own rows: up to four where the part's matrices take the
// tile GEMV of several rows (the first layer's Q stands for them), else one.
int BatchPipeline::few_rows(const LoadedModel& b, int rows) {
    const TensorType q = b.weights.layers[size_t(b.layers.first)].q.type;
    const int tile_rows = int(kernels::gemm_tile_rows(b.device->profile(), q));
    return std::clamp(std::min(tile_rows, kFewRowsMost), 1, rows);
}

const BatchPipeline::StepTable& BatchPipeline::table_for(const Stage& s, int n, int step_rows) {
    if (step_rows <= int(s.few.size())) return s.few[size_t(step_rows - 1)];
    return s.tables[s.short_rows > 0 && n <= s.short_rows];
}

// A stage's table for up to `rows` rows, its workgroup counts in half `counts_slot` of the
// scratch's batch_dispatch, recorded.
BatchPipeline::StepTable BatchPipeline::record_table(const Stage& s, const KvPool& pool, int rows, size_t counts_slot,
                                                     int max_sequences, bool one_row, int min_rows) const {
    const LoadedModel& b = *s.part;
    TablePass pass{true, rows, 0, true, {}, nullptr, max_sequences};
    pass.gemv = one_row;
    pass.min_rows = min_rows;
    if (*s.in) pass.split_in = s.in.get();
    if (*s.out) pass.split_out = s.out.get();
    StepTable t;
    t.table = build_table(b, *s.scratch, pool, plan_for(b, *s.scratch, pool, pass), pass);
    const Buffer& counts = s.scratch->get("batch_dispatch");
    t.table->use_counts(counts, counts_slot * (counts.size() / 2), counts.size() / 2);
    t.cl = std::make_unique<CommandList>(b.device, 0);
    t.cl->begin();
    t.table->record(*t.cl);
    t.cl->end();
    return t;
}

// ---- a step ------------------------------------------------------------------------------------

void BatchPipeline::run(const uint32_t* ids, const BatchRow* rows, const uint32_t* targets, int n) {
    const bool two = microbatches() == 2 && n > 1 &&
                     (!auto_ || n >= kMicrobatchRowsAuto || n > lanes_[0][0].rows);  // a step too large for one half
    const int lanes = two ? 2 : 1;
    cut_ = lanes == 2 ? (n + 1) / 2 : n;
    last_rows_ = n;
    const int first[] = {0, cut_}, count[] = {cut_, n - cut_};
    for (int k = 0; k < lanes; ++k)
        for (Stage& s : lanes_[size_t(k)]) write_rows(s, ids + first[k], rows + first[k], targets + first[k], count[k]);
    // The wavefront: at tick t micro-batch k runs on part t - k, after its part before handed
    // its residual stream over; a tick's submissions (one per device) run at once.
    const int parts = int(lanes_[0].size());
    for (int t = 0; t < parts + lanes - 1; ++t) {
        std::vector<CommandList*> running;
        for (int k = 0; k < lanes; ++k) {
            const int p = t - k;
            if (p < 0 || p >= parts) continue;
            std::vector<Stage>& lane = lanes_[size_t(k)];
            if (p > 0)
                hand_over(*lane[size_t(p - 1)].out, *lane[size_t(p)].in,
                          size_t(count[k]) * size_t(lane[size_t(p)].part->config.dim) * 4);
            running.push_back(&submit(lane[size_t(p)], count[k], n));
        }
        for (CommandList* cl : running) cl->wait(cl->device().profile().spin_wait);
    }
}

void BatchPipeline::write_rows(Stage& s, const uint32_t* ids, const BatchRow* rows, const uint32_t* targets, int n) {
    std::memcpy(s.scratch->get("batch_token_ids").contents(), ids, size_t(n) * 4);
    std::memcpy(s.scratch->get("batch_targets").contents(), targets, size_t(n) * 4);
    auto* step = static_cast<StepState*>(s.scratch->get("batch_step").contents());
    *step = StepState{0, 0, uint32_t(n), 0};
    // A sequence's rows sit side by side at consecutive positions; [first, end) narrows to those
    // of its rows this micro-batch holds (a recent window reads them from the micro-batch's rows).
    auto* step_rows = reinterpret_cast<BatchRow*>(step + 1);
    s.latest = 0;
    for (int r = 0; r < n; ++r) {
        step_rows[r] = rows[r];
        s.latest = std::max(s.latest, rows[r].pos);
        step_rows[r].first = std::max(rows[r].first, rows[r].pos - std::min(rows[r].pos, uint32_t(r)));
        step_rows[r].end = std::min(rows[r].end, rows[r].pos + uint32_t(n - r));
    }
    s.untiled =
        cut_batch_tiles(step_rows, n, s.tile_rows, static_cast<BatchTile*>(s.scratch->get("batch_tiles").contents()),
                        batch_tile_capacity(uint64_t(s.rows)));
}

CommandList& BatchPipeline::submit(Stage& s, int n, int step_rows) {
    const StepTable& t = table_for(s, n, step_rows);
    // The rows' split attention covers the chunks through the latest position.
    t.table->set_step(uint32_t(n), s.latest, s.untiled);
    t.cl->submit();
    return *t.cl;
}

// ---- what a step leaves ------------------------------------------------------------------------

std::pair<const BatchPipeline::Stage*, size_t> BatchPipeline::locate(int row) const {
    return row < cut_ ? std::pair{&lanes_[0].back(), size_t(row)} : std::pair{&lanes_[1].back(), size_t(row - cut_)};
}

uint32_t BatchPipeline::sampled(int row) const {
    const auto [s, r] = locate(row);
    return static_cast<const uint32_t*>(s->scratch->get("batch_sampled").contents())[r];
}

float BatchPipeline::logprob(int row) const {
    const auto [s, r] = locate(row);
    return static_cast<const float*>(s->scratch->get("batch_logprobs").contents())[r];
}

float BatchPipeline::target_logprob(int row) const {
    const auto [s, r] = locate(row);
    return static_cast<const float*>(s->scratch->get("batch_target_logprobs").contents())[r];
}

bool BatchPipeline::target_is_argmax(int row) const {
    const auto [s, r] = locate(row);
    return static_cast<const uint32_t*>(s->scratch->get("batch_target_argmax").contents())[r] != 0;
}

void BatchPipeline::read_logits(int row, float* out) const {
    const auto [s, r] = locate(row);
    s->scratch->get("batch_logits").read(out, size_t(vocab_) * 4, r * size_t(vocab_) * 4);
}

void BatchPipeline::set_sampler(int seq, const SamplerState& sampler) {
    for (std::vector<Stage>& lane : lanes_)
        lane.back().scratch->get("batch_samplers").write(&sampler, sizeof sampler, size_t(seq) * sizeof sampler);
}

const DispatchTable& BatchPipeline::table() const { return *last().tables[0].table; }
const DispatchTable* BatchPipeline::short_table() const { return last().tables[1].table.get(); }

std::vector<ProfileRow> BatchPipeline::profile() const {
    AKUNU_CHECK(last_rows_ > 0, "Batch.profile: run a step first (a profile replays the last step)");
    std::vector<ProfileRow> rows;
    for (const Stage& s : lanes_[0]) {
        const std::vector<ProfileRow> part = profile_table(s.part->device, *table_for(s, cut_, last_rows_).table);
        rows.insert(rows.end(), part.begin(), part.end());
    }
    return rows;
}

size_t BatchPipeline::scratch_bytes() const {
    size_t total = 0;
    for (const std::vector<Stage>& lane : lanes_)
        for (const Stage& s : lane)
            total += s.scratch->bytes() + s.scratch->prefill_bytes() + s.in->size() + s.out->size();
    return total;
}

}  // namespace akunu
