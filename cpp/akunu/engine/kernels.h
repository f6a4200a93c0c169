// Launchers for akunu's kernels. Each checks its arguments against the bound ranges (a wrong
// shape is an akunu::Error naming the operand, never an out-of-bounds access), picks the
// variant from the dtype or weight-type table, and emits one DispatchCmd into a sink: a
// CommandList (run now) or a DispatchTable (recorded once, replayed per token).
#pragma once

#include <array>

#include "akunu/model/arch.h"
#include "akunu/vulkan/command_list.h"
#include "akunu/formats/dtype.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kv_format.h"
#include "akunu/formats/tensor_types.h"
#include "params.h"

namespace akunu::kernels {

// out[0:n] = value (f32, f16), or the raw 32-bit pattern `bits` for u32.
void fill(DispatchSink& s, const Binding& out, DType dtype, size_t n, float value, uint32_t bits = 0);

// dst[0:bytes] = src[0:bytes] on the compute queue; bytes must be a multiple of 4.
void copy(DispatchSink& s, const Binding& src, const Binding& dst, size_t bytes);
// Reads src[0:bytes] (a multiple of 16) and stores nothing: the device's read rate, for the
// kernel benchmark. `flag`'s first word is written only if a 16-byte vector is all ones.
void read(DispatchSink& s, const Binding& src, const Binding& flag, size_t bytes);

// c[0:n] = a[0:n] + b[0:n]; dtype f32 or f16.
void add(DispatchSink& s, const Binding& a, const Binding& b, const Binding& c, DType dtype, size_t n);
// c[r, 0:n] = a[r, 0:n] + b[r, 0:n] for r < rows, each operand's rows `stride` elements apart
// (b_stride 0: the same b row, such as a bias, for every row).
struct RowsShape {
    size_t n, rows, a_stride, b_stride, c_stride;
};
void add_rows(DispatchSink& s, const Binding& a, const Binding& b, const Binding& c, DType dtype,
              const RowsShape& shape);

// y[rows, dim] = rmsnorm(x[rows, dim]) * (w[dim] + weight_offset); dtype f32 or f16. Rows come
// in groups of `group` contiguous rows, group_stride elements apart (0: contiguous groups).
void rmsnorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, DType dtype, size_t rows,
             size_t dim, float eps, float weight_offset = 0.0f, size_t group = 1, size_t group_stride = 0);

// y[rows, dim] as f16 = rmsnorm(x[rows, dim] f32) * (w[dim] f32 + weight_offset): a prefill
// chunk's normed rows as the halves the GEMM reads (gemm_takes_half_x).
void rmsnorm_to_f16(DispatchSink& s, const Binding& x, const Binding& w, const Binding& y, size_t rows, size_t dim,
                    float eps, float weight_offset);

// Weight types the GEMV, GEMM and embedding kernels read directly (quantized weights stay
// quantized), and their names as a list for error messages ("F32, F16, ..., Q6_K"). The CPU
// backend's tile-major forms (*_T32, formats/tiles.h) count as their base type; only GEMV and GEMM
// have kernels for them, on the CPU backend.
bool weight_type_supported(TensorType type);
std::string supported_weight_types();
// The kernel name of a weight-type variant: ("gemv", Q4_0) -> "gemv_q4_0"; throws for types
// without one.
std::string weight_variant(const char* kernel, TensorType type);

// What a GEMV folds into its input x (GemvParams.x_op): an RMSNorm, x * (weight +
// weight_offset) / sqrt(mean(x^2) + eps), or a gated activation, act(x) * up, with x the gate.
struct GemvInput {
    uint32_t op = 0;  // AKUNU_GEMV_* (params.h)
    Binding second;  // [k] f32: the norm's weight, or up; [partials] for rmsnorm_ready
    float eps = 0.0f;
    float weight_offset = 0.0f;
    uint32_t partials = 0;  // rmsnorm_ready: the sums of squares in `second`

    static GemvInput rmsnorm(const Binding& weight, float eps, float weight_offset);
    // Throws for an activation without a gated form (kGelu).
    static GemvInput gated(Activation act, const Binding& up);
    // An RMSNorm handed forward by the GEMV that wrote x (GemvNormOut): x comes weighted, and
    // `sums` holds that GEMV's `partials` sums of squares of the unweighted rows.
    static GemvInput rmsnorm_ready(const Binding& sums, uint32_t partials, float eps);
};
// The next pre-norm handed forward by a GEMV that adds into the residual stream (the O and
// down projections of a decode step): besides y += W·x it writes x_next = y * (weight +
// weight_offset) and, per workgroup, the sum of its rows' squares, so that the GEMVs reading
// the normed stream (GemvInput::rmsnorm_ready) load neither the norm's weight nor all of y
// for its mean. Those two loads are a measurable share of a float model's decode step, and
// handing the norm forward wins part of it back (bench/NOTES.md, "The next norm handed forward
// by the GEMV that writes the residual stream"). Only where gemv_hands_norm_forward.
struct GemvNormOut {
    Binding weight;  // [rows] f32: the next norm's weight
    float weight_offset = 0.0f;
    Binding normed;  // [rows] f32: y * (weight + weight_offset)
    Binding sums;  // [gemv_norm_partials(rows)] f32
};
// The sums of squares a GemvNormOut GEMV of `rows` rows writes: one per workgroup.
uint32_t gemv_norm_partials(const DeviceProfile& device, TensorType wtype, size_t rows);
// y[rows] f32 = W[rows, k] · x[k] f32 (y += ... with accumulate), W of any supported weight type;
// with `input`, x is formed as it says. Q8_0, Q4_0 and Q4_1 rows of a multiple of 256
// take integer dot products against x rounded to int8 where the device has them (gemv_int_dot)
// and `rounding` asks for it; their float path is gemv.comp. Their tile-major forms (*_T32) take
// gemv_tiles.comp on Vulkan devices (gemv_fuses_parts), with x rounded to int8 on the same
// terms, or to int16 for any k (gemv_int16).
//
// A hand-off (GemvHandoff) lets two consecutive tile GEMVs of a decode step (or attention and
// the O GEMV after it, tiled or float) run with no barrier between them: the first counts its
// workgroups (attention: its heads) in as their rows of y are written (`signal`),
// the second's workgroups start their weight loads at once and wait for that count before they
// read x (`wait`). The second dispatch's launch and first loads overlap the first one's tail,
// which a barrier (the device drained, then the next launched) does not allow. It rests on the
// device starting every workgroup of a dispatch before any of the next one's, as NVIDIA's does
// (DeviceProfile::gemv_handoff); on a device that does not, the waits would time out (a few
// seconds each), count the error in counters word 0 and compute from a partial x, not hang.
// Slots count up from zero; a later GEMV, after a barrier that follows every wait on them,
// zeroes them for the next step (`clear`).
struct GemvHandoff {
    Binding counters;  // handoff_counters_bytes(slots): an error word, then one word a slot, zeroed
    uint32_t signal = 0, wait = 0;  // slots 1.. (0: none)
    uint32_t wait_count = 0;  // the workgroups the waited-for GEMV has (gemv_tiles_groups)
    uint32_t clear = 0, clear_count = 0;  // slots clear .. clear + clear_count - 1 to zero
};
size_t handoff_counters_bytes(uint32_t slots);
void gemv(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y, size_t rows,
          size_t k, bool accumulate = false, const GemvInput* input = nullptr, XRounding rounding = XRounding::kFloat,
          const GemvHandoff* handoff = nullptr, const GemvNormOut* norm_out = nullptr);
// rope_kv folded into the Q/K/V gemv_parts of a decode step (one token, at step.pos): Q and K
// rotated on adjacent pairs (RopeStyle::kInterleaved) or, with half_split, on (i, i + head_dim
// / 2) (RopeStyle::kHalfSplit) with the given tables, and K and V also stored to an f16 cache of
// full rows, a ring or blocks, or to a batch's pool (KvRows::kBatch) for the one row of a step,
// at that row's position in its sequence's blocks (`step` then holds the StepState and that
// BatchRow: a batch's one-row table). A quantized cache is not written: kv_write packs its rows
// after, or the attention does (AttentionNewest::kPacked). Only where gemv_folds_rope_kv.
struct GemvRopeKv {
    Binding cos, sin;  // [positions, head_dim / 2] f32
    KvBindings cache;
    Binding step;
    uint32_t head_dim = 0;
    uint32_t positions = 0;  // rows of the tables: the context
    bool half_split = false;
};
// y_i[0 : rows[i]] = W_i · x for i < 3 in one dispatch: the projections that read the same x
// (Q, K and V; gate and up, with rows[2] = 0, whose W and y are then not read). Only where
// gemv_fuses_parts. With `rope`, also rope_kv's work (GemvRopeKv). `rounding` as in gemv().
void gemv_parts(DispatchSink& s, const std::array<Binding, 3>& w, TensorType wtype, const Binding& x,
                const std::array<Binding, 3>& y, const std::array<size_t, 3>& rows, size_t k,
                const GemvInput* input = nullptr, const GemvRopeKv* rope = nullptr,
                XRounding rounding = XRounding::kFloat, const GemvHandoff* handoff = nullptr);
// y[rows] = act(W_gate · x) * (W_up · x) in one dispatch, for float weights on Vulkan devices
// (gemv_fuses_gate_up): each workgroup takes rows of both matrices, so that the decode FFN runs
// no activation dispatch between gate/up and down. `input` folds the FFN's norm as in gemv().
void gemv_gate_up(DispatchSink& s, const Binding& w_gate, const Binding& w_up, TensorType wtype, const Binding& x,
                  const Binding& y, size_t rows, size_t k, Activation act, const GemvInput* input = nullptr);

// Y[m, n] f32 = X[m, k] f32 · W[n, k]^T (Y += with accumulate) for the rows m below
// min(m, step.n_tokens); X rows ldx floats apart, Y rows ldy apart. Uses cooperative matrices
// when the device has them (DeviceProfile::gemm_coopmat) unless allow_coopmat is false (tests
// check the scalar variant on such devices too). The dispatch runs only for chunks of
// min_rows <= step.n_tokens < max_rows tokens (max_rows 0: no bound). It runs in short tiles
// where it sees no more rows than DeviceProfile::gemm_short_rows (its m, or what its row window
// admits); a chunk table records a longer chunk's GEMM twice, short for up to those rows and
// wide for more.
void gemm(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& x, const Binding& y,
          const GemmShape& shape, const Binding& step, bool accumulate = false, bool allow_coopmat = true);

void gemm_gated(DispatchSink& s, Activation act, const Binding& w_gate, const Binding& w_up, const Binding& x,
                const Binding& out, const GemmShape& shape, const Binding& step);

// out[n, k] f16 = W[n, k] (a block format), when step.n_tokens >= min_rows (else nothing).
void dequant_f16(DispatchSink& s, const Binding& w, TensorType wtype, const Binding& out, size_t n, size_t k,
                 const Binding& step, uint32_t min_rows);

// out[r, 0:dim] f32 = scale * W[token_ids[step.token_slot + r], :] for r < min(rows, step.n_tokens).
// W may be a window of the table: rows [first_row, first_row + vocab) (weight_windows.h); rows
// of out whose token lies outside it are left as they are.
void embed(DispatchSink& s, const Binding& w, TensorType wtype, size_t vocab, const Binding& token_ids,
           const Binding& step, const Binding& out, size_t dim, float scale, size_t rows = 1, size_t first_row = 0);

// dst[0:dim] = src[step.n_tokens - 1, 0:dim].
void last_row(DispatchSink& s, const Binding& src, const Binding& dst, const Binding& step, size_t rows, size_t dim);

// x[r, 0:n] = cap * tanh(x[r, 0:n] / cap) in place for r < min(rows, step.n_tokens): the
// final-logit soft-capping (gemma2). cap must be positive; callers skip it when there is none.
void softcap(DispatchSink& s, const Binding& x, const Binding& step, size_t rows, size_t n, float cap);

// x[r, h * head_dim : (h + 1) * head_dim] = H x[r, ...] in place for heads h < heads and rows
// r < min(rows, step.n_tokens), rows row_stride floats apart: H the orthonormal Walsh-Hadamard
// matrix of kv_rotation_block(head_dim), block-diagonal over the head (int4h, kv_format.h).
// H is its own inverse.
void hadamard_rows(DispatchSink& s, const Binding& x, const Binding& step, size_t rows, size_t heads, size_t head_dim,
                   size_t row_stride);

struct RopeKvShape {
    uint32_t n_heads, n_kv_heads, head_dim, max_len;
    bool interleaved, rotate;
    uint32_t rows = 1;  // token rows of qkv
    uint32_t row_stride = 0;  // floats between rows; 0: q_dim + 2 kv_dim
};
// RoPE on Q and K of qkv (in place) for rows r < min(rows, step.n_tokens) at step.pos + r,
// and the K/V cache write (for a quantized cache, a second dispatch packs the rows; for a
// rotated one, hadamard_rows on Q, K and V comes between).
void rope_kv(DispatchSink& s, const Binding& qkv, const Binding& cos, const Binding& sin, const KvBindings& cache,
             const Binding& step, const RopeKvShape& shape);
// Where attention finds the step's own K and V row: in the cache (kInCache), or, with kPacked
// (only where attention_packs_newest), in `q`, which is then the step's [q | k | v] row (K with
// its RoPE, rotated for a rotated cache), and attention packs that row into the quantized cache
// itself, with kv_store's scales and codes, in place of kv_write's kv_store dispatch.
enum class AttentionNewest { kInCache, kPacked };

// rope_kv's write of a quantized cache alone, for rows whose RoPE the Q/K/V GEMV has applied
// (gemv_parts, gemv_tiles with GemvRopeKv over a quantized cache).
// With AttentionNewest::kPacked, the attention after packs the rows: only a rotated cache's
// rotation runs here.
void kv_write(DispatchSink& s, const Binding& qkv, const KvBindings& cache, const Binding& step,
              const RopeKvShape& shape, AttentionNewest newest = AttentionNewest::kInCache);

// The recent window's ring write (kv_recent_store.comp): rows r < min(rows, step.n_tokens) of
// qkv give their K and V heads as f16 to the cache's rings (KvBindings::k_recent, v_recent), at
// row (step.pos + r) % recent_rows; dispatched after the step's attention has read the rings.
// A batch's cache (KvRows::kBatch): rings [sequences, n_kv, recent_rows, head_dim], row r into
// its BatchRow's sequence's at its position.
void kv_recent_store(DispatchSink& s, const Binding& qkv, const KvBindings& cache, const Binding& step,
                     const RopeKvShape& shape);

struct AttentionShape {
    uint32_t n_heads, n_kv_heads, head_dim, max_len, window;
    float scale, softcap;
};
// 32-bit words of the partial results attention() needs: [n_heads, chunks, head_dim + 2]
// floats, then an arrival counter per head, which must be zero before the first dispatch
// (each dispatch leaves it zero again); the counters start attention_counters_offset bytes in.
size_t attention_partial_floats(uint32_t n_heads, uint32_t head_dim, uint32_t max_len);
size_t attention_counters_offset(uint32_t n_heads, uint32_t head_dim, uint32_t max_len);
// out[n_heads, head_dim] = softmax(q K^T * scale) V over the cache rows up to step.pos, split
// along the sequence into chunks, in one dispatch: the last workgroup of each head to finish
// merges its chunks. With `handoff` (a signal only), each head's output counts in as it is
// written, for an O GEMV that waits on it instead of a barrier (GemvHandoff).
void attention(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& partial, const Binding& out,
               const Binding& step, const AttentionShape& sh, const GemvHandoff* handoff = nullptr,
               AttentionNewest newest = AttentionNewest::kInCache);

// Causal attention of a prefill chunk: out[r, h] for query rows r < min(rows, step.n_tokens)
// at positions step.pos + r, over the cache (which rope_kv has filled through the chunk).
// out_dtype f16 writes halves (the O projection's GEMM X, gemm_takes_half_x): flash_cm.comp
// only (flash_attention_coopmat).
struct FlashShape {
    AttentionShape heads;
    uint32_t rows, q_stride, out_stride;
    DType out_dtype = DType::kF32;
};
void flash_attention(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out,
                     const Binding& step, const FlashShape& shape);
// Causal attention of a batched step's rows (attention_rows.comp): row r < min(rows,
// step.n_tokens) of BatchRow r's sequence at its position, over that sequence's blocks of a pool
// (KvRows::kBatch) through its position; the step binding holds the StepState and `rows` BatchRows.
// With `tiles` (batch_tile_capacity(rows) BatchTiles) and where batch_tile_rows is not 0, the
// rows of the step's tiles (runs of one sequence) attend in query tiles first (flash_cm.comp or
// flash_attention.comp built with KV_BATCH), and attention_rows skips the rows marked tiled.
// With `partials` and where batch_row_split takes the table, the other rows attend in
// attention_split's layout (attention_split.comp built with KV_BATCH: workgroups per row, head
// and chunk of the row's cache, the last of a row's chunks merging their partials); the table
// then follows the step's latest position (DispatchTable::set_position) as well as its rows.
// partial: batch_row_partial_floats(rows, ...) f32; counters: rows * n_heads u32, zero before
// the first step (each dispatch leaves them zero).
struct RowPartials {
    Binding partial, counters;
};
size_t batch_row_partial_floats(uint32_t rows, uint32_t n_heads, uint32_t head_dim, uint32_t max_len);
void attention_rows(DispatchSink& s, const Binding& q, const KvBindings& cache, const Binding& out, const Binding& step,
                    const FlashShape& shape, const Binding* tiles = nullptr, const RowPartials* partials = nullptr);

// out[n] = act(gate[n]) * up[n]; out f32, or f16 for a GEMM that reads halves (gemm_takes_half_x).
// max_rows: in a chunk's table, only for chunks of fewer tokens (the counts follow n; devices
// with indirect counts), beside a gemm_gated for the longer ones.
void gated_activation(DispatchSink& s, Activation act, const Binding& gate, const Binding& up, const Binding& out,
                      size_t n, DType out_dtype = DType::kF32, uint32_t max_rows = 0);

// out[n] f16 = x[n] f32: the X of a GEMM that reads halves (gemm_takes_half_x) where what
// produced it writes f32 (the attention of a batch, of a cache in blocks or of a quantized one).
// In a chunk's table the counts follow the chunk's rows.
void to_half(DispatchSink& s, const Binding& x, const Binding& out, size_t n);

// Samples one token per row of logits [rows, n] with the SamplerState in `sampler` (greedy,
// or temperature with top-k, top-p and min-p; see shaders/sample.comp): token_ids[out_slot + r]
// and logprobs[out_slot + r].
// With `sequences` (a batched step, sample_batch): row r samples with sampler[BatchRow r's seq]
// of `sequences` SamplerStates, keyed by its position + 1; rows past step.n_tokens are skipped;
// a row with a target (targets[r] < n; AKUNU_NO_TARGET for none) writes target_logprobs[r] (its
// log-probability under the raw logits) and target_is_argmax[r] (1 when it is the row's argmax).
struct ScoredTargets {
    Binding targets, logprobs, is_argmax;  // [rows] u32, f32, u32
};
void sample(DispatchSink& s, const Binding& logits, const Binding& token_ids, const Binding& logprobs,
            const Binding& step, const Binding& sampler, size_t n, uint32_t out_slot, size_t rows = 1,
            size_t sequences = 0, const ScoredTargets* scored = nullptr);

// ---- Encoders (bert) --------------------------------------------------------------------------

// out[n] = act(x[n]), the ungated FFN activation (GELU with erf).
void activation(DispatchSink& s, Activation act, const Binding& x, const Binding& out, size_t n);

// y[r, dim] = LayerNorm(x[r, dim]) * w + b for r < min(rows, step.n_tokens); f32; y may be x.
void layernorm(DispatchSink& s, const Binding& x, const Binding& w, const Binding& b, const Binding& y,
               const Binding& step, size_t rows, size_t dim, float eps);

// Attention of each query row over its span of key rows (params.h EncoderAttentionParams): seq
// holds (start, len) per query row, u32 [rows, 2]. bert binds its qkv as both q and kv; kv_stride
// 0 means q_stride. With `weights` ([rows, n_heads, weights_stride] f32, weights_stride at least
// the longest span) the softmax weights are stored too.
struct EncoderAttentionShape {
    uint32_t n_heads, head_dim, rows, q_stride, k_offset, v_offset, out_stride;
    float scale;
    uint32_t kv_stride = 0;
    uint32_t weights_stride = 0;
};
void encoder_attention(DispatchSink& s, const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                       const Binding& out, const EncoderAttentionShape& shape, const Binding* weights = nullptr);

// encoder_attention inside windows of `window` rows (Whisper's encoder; shape.rows a whole
// number of windows): each row attends every row of its own window, none of another's. Runs
// window_attention.comp over tiles of `tile_rows` query rows (params.h WindowAttentionParams;
// 0: the device's choice), or the per-row encoder_attention through seq ([rows, 2] u32, each
// row's window as (start, window)) on the CPU backend, for head sizes that kernel lacks, and
// where tuning whisper_attn says 0.
void window_attention(DispatchSink& s, const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                      const Binding& out, const EncoderAttentionShape& shape, uint32_t window, uint32_t tile_rows = 0);

// encoder_attention with its weights (shape.weights_stride: the longest span) for a few rows
// over long spans (a decoder step's cross-attention): each (row, head) split over chunks of
// `chunk_keys` keys (0: the device's choice) and merged by the last chunk to finish (span_split;
// params.h SpanSplitParams); partial [span_partial_floats] 32-bit words, zero before the first
// dispatch (the kernel leaves it so), holds the arrival counters and the chunks' sums. The
// weights come out normalized, as encoder_attention's. Where the choice is the per-row kernel (CPU backend,
// tuning whisper_attn), encoder_attention runs instead.
void span_attention_split(DispatchSink& s, const Binding& q, const Binding& kv, const Binding& seq, const Binding& step,
                          const Binding& out, const EncoderAttentionShape& shape, const Binding& weights,
                          const Binding& partial, uint32_t chunk_keys = 0);
// The words span_attention_split's partial holds for `rows` rows: u32 counters [rows, n_heads],
// then f32 [rows, n_heads, AKUNU_SPAN_MAX_CHUNKS, head_dim + 2].
size_t span_partial_floats(size_t rows, size_t n_heads, size_t head_dim);

// out[t, dim] = mean or first row of each packed text, L2-normalized or not, as the header of
// texts (u32 [AKUNU_POOL_HEADER + 2 max_texts]) says (params.h PoolParams).
void pool(DispatchSink& s, const Binding& h, const Binding& texts, const Binding& out, size_t rows, size_t dim,
          size_t max_texts);

// Whisper's log-mel spectrogram (params.h MelParams; kernels_audio.cpp): samples f32 [max_samples],
// dft f32 [2 n_bins, n_fft], filters f32 [n_mels, n_bins], power f32 [max_frames, n_bins] (scratch),
// out f32 [n_mels, n_frames], state MelState; three dispatches over max_frames frames.
struct MelShape {
    size_t n_fft, hop, n_mels, max_samples;
};
void log_mel(DispatchSink& s, const Binding& samples, const Binding& dft, const Binding& filters, const Binding& power,
             const Binding& out, const Binding& state, const MelShape& shape);

// ---- Encoder-decoders (whisper) ----------------------------------------------------------------

// out[rows, channels * kernel] f32: a Conv1d's im2col columns (params.h ConvGatherParams), for
// rows below min(rows, step.n_tokens).
void conv_gather(DispatchSink& s, const Binding& x, const Binding& out, const Binding& step,
                 const ConvGatherParams& shape);

// dst[dst_rows[r] * dst_stride + 0:n] = src[src_rows[r] * src_stride + 0:n] for r < min(rows,
// step.n_tokens), f32 (params.h CopyRowsParams). `src_extent` and `dst_extent`: the rows each
// index may name, checked against the bindings (the indices are the caller's to keep in range).
void copy_rows(DispatchSink& s, const Binding& src, const Binding& src_rows, const Binding& dst,
               const Binding& dst_rows, const Binding& step, const CopyRowsParams& shape, size_t src_extent,
               size_t dst_extent);

// ---- Whisper greedy chains (engine/whisper_chain.h) ---------------------------------------------

// The buffers of a chain step: the slots' states and the decoder's row metadata.
struct ChainRowsBindings {
    Binding state;  // WhisperChainSlot [slots]
    Binding ids, pos, kv_rows, self_seq, cross_seq, head_rows, row_slot;  // u32 [rows] ([rows, 2] for *_seq)
    Binding step, head_step;  // StepState: the decoder's rows, the rows with logits
};
// One running slot per row, in slot order (params.h WhisperChainRowsParams); `rows` rows fit.
void whisper_chain_rows(DispatchSink& s, const ChainRowsBindings& b, const WhisperChainRowsParams& p, size_t rows);
// The token of each of up to `rows` rows of logits f32 [rows, vocab] under its slot's rules,
// masks u32 [slots, 2, mask_words], into tokens u32 / logprobs f32 [slots, steps] (params.h
// WhisperPickParams).
// With top_k > 0 (at most 16 and p.steps), beam search's candidates instead: the top_k likeliest
// ids under the rules into columns [0, top_k), the state unchanged (whisper_pick.comp).
void whisper_pick(DispatchSink& s, const Binding& logits, const Binding& row_slot, const Binding& head_step,
                  const Binding& masks, const Binding& state, const Binding& tokens, const Binding& logprobs,
                  const WhisperPickParams& p, size_t rows, size_t slots, uint32_t top_k = 0);

}  // namespace akunu::kernels
