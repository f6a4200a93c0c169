// DispatchCmd and DispatchTable: a kernel dispatch as data, and the flat list of them that is
// built once at load and recorded into a command buffer (docs/architecture.md, "Dispatch table").
//
// Kernel launchers (kernels.h) emit DispatchCmds into a DispatchSink: a CommandList records
// them at once, a DispatchTable keeps them for recording later and for inspection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/pipeline.h"

namespace akunu {

// A range of a buffer bound to a kernel's binding slot (in binding-number order).
struct Binding {
    const Buffer* buffer = nullptr;
    size_t offset = 0;
    size_t range = 0;  // 0: to the end of the buffer
    // A column view (columns()): the kernel touches only row_bytes of every row_stride bytes
    // from offset. 0: any byte of the range.
    size_t row_stride = 0, row_bytes = 0;

    Binding() = default;
    Binding(const Buffer* b, size_t off = 0, size_t r = 0) : buffer(b), offset(off), range(r) {}
    Binding(const Buffer& b, size_t off = 0, size_t r = 0) : buffer(&b), offset(off), range(r) {}
    // Columns [first, first + width) of rows `stride` bytes long, to the end of the buffer (all
    // in bytes): Q, K and V in one [rows, q | k | v] buffer. Two column views of a buffer with
    // the same stride whose columns do not meet need no barrier between their writers
    // (CommandList), which plain ranges, interleaved row by row, would put there.
    static Binding columns(const Buffer& b, size_t first, size_t width, size_t stride) {
        Binding v(b, first, b.size() - first);
        v.row_stride = stride;
        v.row_bytes = width;
        return v;
    }
    // Bytes visible through this binding.
    size_t bytes() const { return !buffer || offset > buffer->size() ? 0 : (range ? range : buffer->size() - offset); }
};

// How a dispatch of a prefill chunk's table follows the chunk's token count n. The table is
// recorded once for a whole chunk (`rows` tokens); a chunk of n < rows tokens runs only the
// workgroups that cover its n rows, through an indirect dispatch whose counts the table writes
// before each submission (DispatchTable::set_tokens). The kernels lay their work out row-major
// over the chunk's tokens, so the first groups along `axis` are the first tokens'.
struct ChunkRows {
    enum class Axis : uint8_t {
        kNone,  // the count does not follow n (a weight's dequantization)
        kLinear,  // the flat count over x and y (grid_for, linear_group_id in common.glsl)
        kX,  // groups along x are blocks of rows (flash attention's query blocks)
        kY,  // groups along y are blocks of rows (a GEMM's row tiles)
    };
    Axis axis = Axis::kNone;
    uint32_t rows = 0;  // the tokens the recorded counts cover; 0: the dispatch is not a chunk's
    uint32_t min_rows = 0;  // no workgroups at all unless min_rows <= n ...
    uint32_t max_rows = 0;  // ... and n < max_rows (0: no upper bound), as the kernel's own row window
    // The counts follow the step's rows that no query tile takes (DispatchTable::set_step)
    // instead of all its rows: a batch's decode rows' split attention.
    bool untiled = false;
    bool follows() const { return rows > 0; }
    // The workgroup counts for a chunk of n tokens, from those recorded for `rows`.
    void groups_for(uint32_t n, const uint32_t recorded[3], uint32_t out[3]) const;
};

// The most dispatches of one prefill table that follow its chunk's tokens, which the memory
// plan sizes their counts by (batch_dispatch): per layer its norms, up to six per projection
// (tile-row, narrow and wider short, and wide GEMMs of its format, a dequantization and an f16
// GEMM), Q/K/V biases and head
// norms, RoPE and the KV write, attention, the activation, post-norms and a tap; outside the
// layers the embedding and the all-position logits' norm, GEMMs and soft-cap. Model::build_table
// emits them; DispatchTable::use_counts refuses a table that outgrows them.
constexpr uint32_t kChunkDispatchesPerLayer = 64, kChunkDispatchesOutsideLayers = 8;
inline uint64_t chunk_dispatch_bound(int n_layers) {
    return uint64_t(kChunkDispatchesPerLayer) * uint64_t(n_layers) + kChunkDispatchesOutsideLayers;
}
// A decode step's table has one dispatch that follows the cache's length per layer: attention.
inline uint64_t step_dispatch_bound(int n_layers) { return uint64_t(n_layers); }

struct DispatchCmd {
    std::string label;  // "blk.3.attn_q", for inspection
    const Pipeline* pipeline = nullptr;
    std::vector<Binding> bindings;
    std::vector<uint8_t> params;  // the kernel's push-constant block
    uint32_t groups[3] = {1, 1, 1};
    ChunkRows chunk;  // a prefill chunk's: how the counts follow its tokens
    // Non-zero where the groups along y cover the KV cache in blocks of this many positions (a
    // decode step's attention): a step at position pos runs pos / position_block + 1 of them
    // (DispatchTable::set_position), not the whole context's.
    uint32_t position_block = 0;
    // The kernel waits for the previous command's writes itself (a GEMV hand-off,
    // kernels::GemvHandoff): no barrier for reading or writing what that command wrote.
    bool awaits_previous = false;
    bool follows() const { return chunk.follows() || position_block > 0; }
};

class DispatchSink {
public:
    virtual ~DispatchSink() = default;
    virtual Device& device() const = 0;
    virtual void dispatch(const DispatchCmd& cmd) = 0;
    // The label the next dispatches carry (set by whoever builds a model's table).
    void set_label(std::string label) { label_ = std::move(label); }
    const std::string& label() const { return label_; }
    // While non-zero, the next dispatches run over the rows of a prefill chunk of that many
    // tokens, and their workgroups follow the chunk's token count (ChunkRows); 0 ends it.
    void set_chunk_rows(uint32_t rows) { chunk_rows_ = rows; }
    uint32_t chunk_rows() const { return chunk_rows_; }

private:
    std::string label_;
    uint32_t chunk_rows_ = 0;
};

class CommandList;

class DispatchTable : public DispatchSink {
public:
    explicit DispatchTable(Device& device) : device_(&device) {}
    Device& device() const override { return *device_; }
    void dispatch(const DispatchCmd& cmd) override;
    // Records every command into `cl`; with `timestamps`, a GPU timestamp before the first
    // command and after each one (their indices are appended): the per-kernel profile.
    // Commands that follow a chunk's tokens are recorded as indirect dispatches.
    void record(CommandList& cl, std::vector<int>* timestamps = nullptr) const;
    const std::vector<DispatchCmd>& commands() const { return cmds_; }
    // Sets the workgroup counts of the commands that follow a chunk's tokens for a chunk of n
    // tokens, for every recording of this table; call it before submitting one. A host write
    // of a few words: nothing is allocated. Recordings start with the counts of a whole chunk.
    void set_tokens(uint32_t n);
    // Sets the counts of the commands that follow the cache's length (position_block) for a
    // step at position pos, likewise; recordings start with the whole context's.
    void set_position(uint32_t pos);
    // A batched step's set_tokens(n) and set_position(pos) in one pass over the counts, and the
    // counts of the commands that follow its untiled rows (ChunkRows::untiled) for `untiled` of
    // them; until a first set_step those follow the tokens.
    void set_step(uint32_t n, uint32_t pos, uint32_t untiled);
    // Where the counts live: a host-memory range of the model's planned scratch. Without it the
    // first recording allocates their buffer itself. Throws if the table needs more.
    void use_counts(const Buffer& buffer, size_t offset, size_t bytes);
    // Until end_insert(), dispatch() inserts the commands at `index`, in the order given,
    // instead of appending them: a builder places work earlier than it reaches it, where its
    // inputs are ready (a prefill chunk's dequantization right after the GEMM before it).
    void insert_at(size_t index);
    void end_insert() { insert_ = kAppend; }

private:
    Device* device_;
    std::vector<DispatchCmd> cmds_;
    // The commands that follow the chunk (indices into cmds_), and their VkDispatchIndirectCommands,
    // one each in that order, in mapped memory the GPU reads at each submission: given by
    // use_counts, or made by the first recording (mutable: recording is const for the table's
    // commands).
    std::vector<size_t> following_;
    mutable Binding counts_;
    mutable Buffer own_counts_;
    static constexpr size_t kAppend = SIZE_MAX;
    size_t insert_ = kAppend;  // where dispatch() puts the next command (insert_at)
    uint32_t tokens_ = 0;  // 0: a whole chunk
    static constexpr uint32_t kWholeContext = 0xFFFFFFFFu;
    uint32_t position_ = kWholeContext;
    static constexpr uint32_t kAllRows = 0xFFFFFFFFu;
    uint32_t untiled_ = kAllRows;  // kAllRows: the untiled commands follow the tokens
    void write_counts() const;
};

}  // namespace akunu
