// Host-shader parameter structs: the one definition of every kernel's push-constant block.
//
// Included by GLSL kernels and by C++ (cpp/akunu/kernels.cpp). Only 4-byte scalars appear, so
// C++, std430 and the scalar layout agree; C++ checks each size with static_assert, and pipeline
// creation checks it again against the kernel's SPIR-V.
#ifndef AKUNU_PARAMS_H
#define AKUNU_PARAMS_H

#ifdef __cplusplus
#include <cstdint>
namespace akunu {
using uint = uint32_t;
#define AKUNU_PARAMS_SIZE(type, bytes) static_assert(sizeof(type) == (bytes), #type " must match the GLSL block");
#else
#define AKUNU_PARAMS_SIZE(type, bytes)
#endif

// Kernels index large 1-D problems with a 2-D grid of workgroups (maxComputeWorkGroupCount[0]
// is 65,535 on many devices); element i = (group.y * groups.x + group.x) * local_size + local.

// fill_*: out[i] = value for i < n. fill_u32 stores `bits` instead of `value`.
struct FillParams {
    uint n;       // elements
    float value;
    uint bits;
};
AKUNU_PARAMS_SIZE(FillParams, 12)

// copy_u32: dst[i] = src[i] for i < n 32-bit words.
struct CopyParams {
    uint n;  // 32-bit words
};
AKUNU_PARAMS_SIZE(CopyParams, 4)

// add_*: c[r, i] = a[r, i] + b[r, i] for r < rows, i < n, computed in fp32; row r of each
// operand starts r * stride elements in (a b_stride of 0 adds one row, a bias, to every row).
struct AddParams {
    uint n;  // elements per row
    uint rows;
    uint a_stride;
    uint b_stride;
    uint c_stride;
};
AKUNU_PARAMS_SIZE(AddParams, 20)

// rmsnorm_*: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * (w + weight_offset).
// weight_offset is 0 for llama-style norms and 1 for gemma's (1 + w). Rows come in groups of
// `group` contiguous rows, groups group_stride elements apart: the per-head Q/K norms of a
// prefill chunk are n_heads rows inside each token's [q | k | v] row.
struct RmsNormParams {
    uint rows;
    uint dim;
    float eps;
    float weight_offset;
    uint group;
    uint group_stride;
};
AKUNU_PARAMS_SIZE(RmsNormParams, 24)

// gemv_*: y[n] = sum_k W[n, k] * x[k] for n < rows; W row-major [rows, k] of the variant's
// weight type (block formats: rows of k/32 blocks).
// accumulate = 1 adds to y instead of overwriting it: the residual add fused into the O and
// down projections. x_op says how the products form x from binding 1 (x) and binding 3 (g):
//   AKUNU_GEMV_X          x as it is (binding 3 unused);
//   AKUNU_GEMV_RMSNORM    x * (g + weight_offset) / sqrt(mean(x^2) + eps), the pre-norm fused
//                         into the projections that follow it (every workgroup reads all of x
//                         anyway, so each forms the mean itself);
//   AKUNU_GEMV_SILU_GATE  silu(x) * g, and AKUNU_GEMV_GELU_TANH_GATE gelu_tanh(x) * g: the
//                         gated FFN activation fused into the down projection (x the gate,
//                         g the up projection), one dependent dispatch fewer per layer.
//   AKUNU_GEMV_RMSNORM_READY  an RMSNorm handed forward by the GEMV that wrote x (norm_out
//                         below): x is already times (g + weight_offset), and binding 3 holds
//                         norm_partials sums of squares of the unweighted x, whose total gives
//                         1 / rms. No g loads and no pass over x for its mean.
#define AKUNU_GEMV_X 0u
#define AKUNU_GEMV_RMSNORM 1u
#define AKUNU_GEMV_SILU_GATE 2u
#define AKUNU_GEMV_GELU_TANH_GATE 3u
#define AKUNU_GEMV_RMSNORM_READY 4u
struct GemvParams {
    uint rows;
    uint k;
    uint accumulate;
    uint x_op;  // AKUNU_GEMV_*
    float eps;
    float weight_offset;
    // Rows of a second and third matrix that one dispatch multiplies by the same x, each into
    // its own y (kernels::gemv_parts: Q, K and V; gate and up); 0 where there are fewer.
    uint rows1;
    uint rows2;
    // Q, K and V (kernels::GemvRopeKv): head_dim > 0 folds rope_kv into the products, RoPE on
    // pairs of Q and K rows and K and V stored to an f16 cache of cache_rows rows per head (a
    // ring where the sequence is longer) at step.pos; 0: no fold. Pairs are adjacent rows
    // (2 f, 2 f + 1), or with rope_half_split (f, f + head_dim / 2), which only gemv_parts.comp takes.
    uint rope_head_dim;
    uint rope_cache_rows;
    uint rope_half_split;
    // A hand-off between two GEMVs with no barrier between them (gemv_tiles.comp HANDOFF,
    // kernels::GemvHandoff): slots of binding 13's counters (word 0 counts timed-out waits),
    // 0 for none. `signal`: each workgroup, once its rows of y are written, adds one to that
    // slot. `wait`: the workgroups wait until that slot reaches wait_count before they read x.
    // `clear`: slots clear .. clear + clear_count - 1 are zeroed (their waits ended before).
    uint handoff_signal;
    uint handoff_wait;
    uint handoff_wait_count;
    uint handoff_clear;
    uint handoff_clear_count;
    // The next pre-norm handed forward (gemv.comp's float rows, kernels::GemvNormOut): with
    // norm_out = 1, a GEMV that adds into the residual stream (accumulate) also writes each
    // finished row times (binding 4's norm weight + norm_out_offset) to binding 5, and each
    // workgroup's sum of its rows' squares to binding 6 (one float per workgroup), which the
    // GEMVs after it read as AKUNU_GEMV_RMSNORM_READY.
    uint norm_out;
    float norm_out_offset;
    uint norm_partials;  // AKUNU_GEMV_RMSNORM_READY: the sums of squares at binding 3
    uint pad;
};
AKUNU_PARAMS_SIZE(GemvParams, 80)

// The step state: what changes from one decode step to the next, read by kernels from a small
// device buffer so that a recorded command buffer is replayed unchanged.
// A decode step has n_tokens = 1; a prefill chunk runs n_tokens <= its table's rows, so one
// recorded chunk table serves every prompt length (rows past n_tokens are skipped).
struct StepState {
    uint pos;         // position of the first token (its KV-cache slot)
    uint token_slot;  // index into the token-id buffer of the first token
    uint n_tokens;    // tokens in this step
    uint pad;
};
AKUNU_PARAMS_SIZE(StepState, 16)

// A batched step (engine/batch.h) runs rows of many sequences in one table. Its step binding
// holds the StepState (n_tokens: the rows this step) and then one BatchRow per row: the row's
// sequence (its block table is entry `seq` of the pool's tables, and its sampler entry `seq`
// of the samplers) and its position. Kernels built with KV_BATCH (kv_rows.glsl) read them.
// first and end bound the positions its sequence runs in this step (or micro-batch,
// batch_pipeline.h), [first, end): rows that sit side by side (a recent window reads the step's
// own rows there, kv_recent.glsl). tiled: 1 where the row's attention runs in a query tile
// (BatchTile), so that attention_rows leaves it alone. The batch sets it on the rows of a
// prompt's piece of 2 or more rows; the host that cuts the tiles clears it where a row gets none.
struct BatchRow {
    uint seq;
    uint pos;
    uint first;
    uint end;
    uint tiled;
    // Entry k's untiled_row: the step's k-th row not marked tiled, in row order. These are the
    // rows attention_split's batch variant attends, and its workgroups follow their count.
    uint untiled_row;
    uint pad1;
    uint pad2;
};

// A tile of a batched step's rows that belong to one sequence at consecutive positions, up to a
// flash kernel's block of query rows: rows first_row .. first_row + rows - 1, the first at batch
// row first_row's position. The host cuts them every step from the rows marked tiled and writes
// them into the batch_tiles buffer, one entry per workgroup column of the tiled attention; the
// entries past the step's tiles hold rows 0. A tile holds 2 rows or more, but for a piece's
// last row past its whole tiles and the part of a piece cut by a micro-batch's end, so a step of
// n rows has at most n / 2 + 1 tiles.
struct BatchTile {
    uint first_row;
    uint rows;
};

// A batched step's row with no token to score (sample_batch's targets).
#define AKUNU_NO_TARGET 0xFFFFFFFFu
AKUNU_PARAMS_SIZE(BatchRow, 32)
AKUNU_PARAMS_SIZE(BatchTile, 8)
#ifdef __cplusplus
// The tiles a step of up to `rows` rows may hold, the entries of batch_tiles.
inline uint64_t batch_tile_capacity(uint64_t rows) { return rows / 2 + 1; }
#endif

// embed_*: out[r, 0:dim] = scale * W[token_ids[step.token_slot + r], :] for r < min(rows, step.n_tokens)
struct EmbedParams {
    uint dim;
    float scale;
    uint rows;
    uint vocab;  // rows of W (MLX weights find their scales after all rows' codes)
    // W holds rows [first_row, first_row + vocab) of the table (a window: engine/weight_windows.h);
    // tokens outside them are another dispatch's, and their rows are left as they are.
    uint first_row;
};
AKUNU_PARAMS_SIZE(EmbedParams, 20)
// Elements per invocation of embed_* for block formats: one w_load8() (float types: 1).
#define AKUNU_EMBED_BLOCK_ITEM 8

// gemm_*: Y[m, n] = sum_k X[m, k] * W[n, k] for m < min(m, step.n_tokens), n < n (Y += with
// accumulate). X f32 rows ldx floats apart, Y f32 rows ldy floats apart (Y may be a column
// slice of a wider buffer, as Q, K and V are of qkv); W as in gemv. The dispatch does nothing
// unless min_rows <= step.n_tokens < max_rows (max_rows 0: no bound), so that one recorded
// table can hold two ways to one product and each chunk takes the one that suits its length.
struct GemmParams {
    uint m;
    uint n;
    uint k;
    uint ldx;
    uint ldy;
    uint accumulate;
    uint min_rows;
    uint max_rows;
};
AKUNU_PARAMS_SIZE(GemmParams, 32)
#define AKUNU_ROWS_IN_WINDOW(rows, lo, hi) ((rows) >= (lo) && ((hi) == 0u || (rows) < (hi)))

// dequant_f16_<wtype>: out[n, k] (f16) = W[n, k] of a block format, for a prefill chunk of at
// least min_rows tokens (else nothing): the GEMM of a long chunk then reads f16 weights.
struct DequantParams {
    uint n;
    uint k;
    uint min_rows;
};
AKUNU_PARAMS_SIZE(DequantParams, 12)

// last_row: dst[0:dim] = src[(step.n_tokens - 1) * dim : +dim], the prompt's last token.
struct LastRowParams {
    uint dim;
};
AKUNU_PARAMS_SIZE(LastRowParams, 4)

// softcap: x[r, i] = cap * tanh(x[r, i] / cap) in place for r < min(rows, step.n_tokens), i < n
// (gemma2's final-logit soft-capping of the logits rows).
struct SoftcapParams {
    uint n;     // elements per row (the vocabulary)
    uint rows;
    float cap;  // > 0
};
AKUNU_PARAMS_SIZE(SoftcapParams, 12)

// hadamard_rows: for each row r < min(rows, step.n_tokens) of x (f32, row_stride floats apart),
// heads blocks of head_dim values from the row's start are each multiplied in place by the
// orthonormal Walsh-Hadamard matrix of size `block` (block-diagonal where block < head_dim).
// The matrix is symmetric and its own inverse. One workgroup per (row, head), row-major.
struct HadamardRowsParams {
    uint heads;
    uint head_dim;
    uint block;       // a power of two dividing head_dim, at most 256
    uint rows;
    uint row_stride;
};
AKUNU_PARAMS_SIZE(HadamardRowsParams, 20)

// rope_kv: for each token row r < min(rows, step.n_tokens) of qkv (rows of [q | k | v], f32,
// row_stride floats apart), rotates Q and K in place by the cos/sin table row of position
// step.pos + r, and writes K and V into the f16 caches at that position.
struct RopeKvParams {
    uint n_heads;
    uint n_kv_heads;
    uint head_dim;
    uint max_len;      // cache rows per head (the context, or a ring's length: kv_rows.glsl)
    uint interleaved;  // 1: pairs (2i, 2i+1) (GGUF llama); 0: pairs (i, i + head_dim/2) (HF, NeoX)
    uint rotate;       // 0: no RoPE (encoders)
    uint rows;
    uint row_stride;   // floats from one token's q to the next
};
AKUNU_PARAMS_SIZE(RopeKvParams, 32)

// Decode attention is split along the sequence (flash-decoding): attention_split gives each
// (query head, chunk of AKUNU_ATTENTION_CHUNK cache rows) a workgroup that writes a partial
// result [head_dim values, running max, sum of exps]; the last of a head's workgroups to finish
// combines its chunks (an arrival counter per head follows the partials).
// Rows attended: [max(0, pos + 1 - window), pos]; query head h reads KV head
// h / (n_heads / n_kv_heads).
#define AKUNU_ATTENTION_CHUNK 256
struct AttentionParams {
    uint n_heads;
    uint n_kv_heads;
    uint head_dim;
    uint max_len;     // positions (the context)
    uint window;      // 0: none
    float scale;
    float softcap;    // 0: none
    uint n_chunks;    // ceil(max_len / AKUNU_ATTENTION_CHUNK)
    uint cache_rows;  // rows per head of the cache buffer: max_len, or a ring's length (kv_rows.glsl)
    // attention_split: a slot of binding 8's GEMV hand-off counters (kernels::GemvHandoff) that
    // gains one as each head's output is written, for the O GEMV that waits on it; 0: none.
    uint handoff_signal;
    // A windowed cache (kv_recent.glsl): keys and values at positions > pos - recent are read
    // from f16 copies, the step's own from its f32 [q | k | v] rows kv_stride floats apart, older
    // ones from a ring of recent_rows rows per KV head. recent 0: none.
    uint recent;
    uint recent_rows;
    uint kv_stride;
};
AKUNU_PARAMS_SIZE(AttentionParams, 52)

// A KV cache allocated as the sequence grows takes blocks of this many positions
// (shaders/include/kv_rows.glsl). It equals the attention chunk, so a decode workgroup's rows,
// even those past the last position that it reads but masks, lie in one allocated block.
#define AKUNU_KV_BLOCK 256

// flash_attention: causal attention for a prefill chunk. Query row r < min(rows, step.n_tokens)
// sits at position step.pos + r and attends cache rows [max(0, pos + 1 - window), pos]. Q rows
// are q_stride floats apart (inside qkv), output rows out_stride apart. Workgroup: (block of
// AKUNU_FLASH_ROWS query rows, query head); 8 invocations per query row split head_dim.
#define AKUNU_FLASH_ROWS 16
#define AKUNU_FLASH_KEYS 16
#define AKUNU_FLASH_MAX_HEAD_DIM 256
// flash_cm.comp (cooperative matrices): workgroups of 64 query rows, 4 subgroups of 16.
#define AKUNU_FLASH_CM_ROWS 64
struct FlashAttentionParams {
    AttentionParams a;  // n_chunks unused
    uint rows;
    uint q_stride;
    uint out_stride;
};
AKUNU_PARAMS_SIZE(FlashAttentionParams, 64)

// act_*: out[i] = act(gate[i]) * up[i] (SiLU or GELU-tanh).
struct ActParams {
    uint n;
};
AKUNU_PARAMS_SIZE(ActParams, 4)

// The sampler settings, in a small device buffer that the CPU writes when they change (the
// recorded tables read it, so changing the sampler re-records nothing).
struct SamplerState {
    float temperature;  // 0: greedy
    uint top_k;         // 0: off
    float top_p;        // 1: off
    float min_p;        // 0: off
    uint seed_lo;       // the 64-bit seed, the RNG's key
    uint seed_hi;
    uint pad0;
    uint pad1;
};
AKUNU_PARAMS_SIZE(SamplerState, 32)

// sample: for each of `rows` rows of logits [rows, n], token_ids[out_slot + row] = the sampled
// token and logprobs[out_slot + row] = its log-probability under the unfiltered model
// distribution (log_softmax of the raw logits). The token sits at position
// step.pos + step.n_tokens + row, which keys the RNG.
struct SampleParams {
    uint n;
    uint out_slot;
};
AKUNU_PARAMS_SIZE(SampleParams, 8)

// ---- Encoders (bert): see cpp/akunu/encoder.h --------------------------------------------------

// layernorm: y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b for rows r < min(rows,
// step.n_tokens); f32, one workgroup per row; y may be x.
struct LayerNormParams {
    uint rows;
    uint dim;
    float eps;
};
AKUNU_PARAMS_SIZE(LayerNormParams, 12)

// encoder_attention: attention of each query row over a span of key rows. Query row r (below
// step.n_tokens) attends key rows [seq[r].start, seq[r].start + seq[r].len) of kv: packed texts
// never see each other (bert: q, k and v are column slices of one qkv buffer, bound twice), a
// decoder row sees its sequence's cache up to its position, a cross-attention row its audio
// window. Q rows are q_stride floats apart; K and V sit at k_offset and v_offset of kv rows
// kv_stride apart; out rows are out_stride apart. One workgroup per (row, head); a span holds at
// most AKUNU_ENCODER_MAX_KEYS rows. encoder_attention_weights (ATTN_WEIGHTS) also writes the
// softmax weights of (row, head) to weights[(row * n_heads + head) * weights_stride + j].
#define AKUNU_ENCODER_MAX_KEYS 2048
struct EncoderAttentionParams {
    uint n_heads;
    uint head_dim;
    uint rows;
    uint q_stride;
    uint k_offset;
    uint v_offset;
    uint out_stride;
    float scale;
    uint kv_stride;
    uint weights_stride;  // ATTN_WEIGHTS only
};
AKUNU_PARAMS_SIZE(EncoderAttentionParams, 40)

// window_attention: non-causal attention inside windows of `window` rows (whisper's encoder:
// each audio window's rows attend all of that window's rows, and no other's). Row r below
// min(a.rows, step.n_tokens) lies in window r / window. A workgroup takes a tile of query rows
// of one window and one head, and streams the window's K and V rows through shared memory in
// blocks of AKUNU_WINDOW_TILE_VEC4 vec4s each (2048 / head_dim rows) with an online softmax;
// workgroups are ordered (window, tile, head). a.weights_stride is unused.
#define AKUNU_WINDOW_TILE_VEC4 512
#define AKUNU_WINDOW_MAX_HEAD_DIM 256
struct WindowAttentionParams {
    EncoderAttentionParams a;
    uint window;  // rows per window; a.rows is a whole number of windows
    uint tile_rows;  // query rows per workgroup
};
AKUNU_PARAMS_SIZE(WindowAttentionParams, 48)

// span_split: encoder_attention_weights with each (row, head)'s span split into chunks of
// chunk_keys keys, for rows of few queries over long spans (a decoder step's cross-attention).
// The partial buffer holds u32 arrival counters [rows, n_heads] (zero between dispatches), then
// [rows, n_heads, n_chunks, head_dim + 2] f32. One workgroup per (row, head, chunk) writes the
// chunk's exp(s - m_c) to the weights and [o_c (head_dim) | m_c | l_c] to its partial, o_c =
// sum exp(s - m_c) v; the last of a (row, head)'s chunks to arrive scales every weight by
// exp(m_c - M) / L (the softmax) and writes out = sum_c exp(m_c - M) o_c / L. a.weights_stride is the longest
// span; n_chunks = ceil(a.weights_stride / chunk_keys), at most AKUNU_SPAN_MAX_CHUNKS.
#define AKUNU_SPAN_MAX_CHUNKS 64
#define AKUNU_SPAN_MAX_CHUNK_KEYS 512
#define AKUNU_SPAN_GROUP 64
struct SpanSplitParams {
    EncoderAttentionParams a;
    uint chunk_keys;
    uint n_chunks;
};
AKUNU_PARAMS_SIZE(SpanSplitParams, 48)

// pool: one embedding per packed sequence. The texts buffer (u32) starts with a header that
// the CPU writes per batch, {count, mode (0: mean, 1: cls), normalize (0 or 1), 0}, then
// (start, len) pairs; for text t < count, out[t, :] = the mean of rows [start, start + len) of
// h (mean) or row start, the [CLS] token (cls); with normalize, divided by max(L2 norm, 1e-12)
// as torch's F.normalize does.
#define AKUNU_POOL_HEADER 4
struct PoolParams {
    uint dim;
    uint max_texts;
};
AKUNU_PARAMS_SIZE(PoolParams, 8)

// Whisper's log-mel spectrogram in three kernels (engine/whisper_mel.h). The state buffer
// (MelState, written per run) holds the clip's sample count and its frames, n_samples / hop;
// every kernel runs over max_frames and skips frames past n_frames.
//   mel_power: one workgroup per frame t: the frame of n_fft samples centred on t * hop
//     (reflect-padded at both ends), times the windowed DFT table dft [2 n_bins, n_fft] (cos
//     rows, then sin rows, both times the Hann window): power[t, f] = re^2 + im^2.
//   mel_log: one workgroup per frame: out[m, t] = log10(max(sum_f filters[m, f] power[t, f], 1e-10)).
//   mel_norm: one workgroup: out = (max(out, max(out) - 8) + 4) / 4 over [n_mels, n_frames].
#define AKUNU_MEL_MAX_FFT 512
struct MelState {
    uint n_samples;
    uint n_frames;
};
AKUNU_PARAMS_SIZE(MelState, 8)
struct MelParams {
    uint n_fft;       // samples per frame (400)
    uint hop;         // samples between frames (160)
    uint n_bins;      // n_fft / 2 + 1
    uint n_mels;
    uint max_frames;  // rows of power, columns of out's capacity
};
AKUNU_PARAMS_SIZE(MelParams, 20)

// ---- Encoder-decoders (whisper): see cpp/akunu/engine/whisper_model.h -------------------------

// conv_gather: the columns of a Conv1d as a GEMM reads them (im2col). Output row r < min(rows,
// step.n_tokens) is position t = r % t_out of window w = r / t_out, and its column c * kernel + k
// holds input channel c at position t * stride + k - pad of that window (0 outside [0, t_in)):
// x[w * window_stride + c * c_stride + position * t_stride]. A GEMM against the weight
// [out channels, channels * kernel] is then the convolution.
struct ConvGatherParams {
    uint rows;
    uint channels;
    uint kernel;
    uint stride;
    uint pad;
    uint t_in;
    uint t_out;
    uint window_stride;
    uint c_stride;
    uint t_stride;
};
AKUNU_PARAMS_SIZE(ConvGatherParams, 40)

// copy_rows: dst[dst_rows[r] * dst_stride + i] = src[src_rows[r] * src_stride + i] for rows
// r < min(rows, step.n_tokens), i < n (f32): a decode step's K and V into each sequence's
// cache rows, a window's cross-attention K and V into a sequence, one sequence into another.
struct CopyRowsParams {
    uint rows;
    uint n;
    uint src_stride;
    uint dst_stride;
};
AKUNU_PARAMS_SIZE(CopyRowsParams, 16)

// ---- Whisper greedy chains: see cpp/akunu/engine/whisper_chain.h --------------------------------

// One decoder slot's state in a greedy chain (host memory; the host writes it before a chain
// and reads it after, the chain's kernels update it between steps). A slot runs while
// flags has ACTIVE and not DONE.
#define AKUNU_CHAIN_ACTIVE 1u
#define AKUNU_CHAIN_DONE 2u
#define AKUNU_CHAIN_TIMESTAMPS 4u
#define AKUNU_CHAIN_NONE 0xFFFFFFFFu
struct WhisperChainSlot {
    uint token;        // the id the slot's next row feeds
    uint pos;          // that row's position: the positions the slot's cache holds
    uint generated;    // tokens picked so far, <|endoftext|> not counted
    uint max_new;      // the slot is done once it has picked this many
    uint last;         // the last token picked (generated >= 1)
    uint before_last;  // the one before it (generated >= 2)
    uint last_stamp;   // the latest timestamp token picked, or AKUNU_CHAIN_NONE
    uint flags;        // AKUNU_CHAIN_*
    uint max_initial;  // the latest first timestamp (index after timestamp_begin), or AKUNU_CHAIN_NONE
    uint cross_base;   // first row of its audio's cross-attention K/V
    uint picks;        // picks in the current chain (the host zeroes it)
    float no_speech;   // p(no_speech) of the raw logits of its first pick (AKUNU_CHAIN_NONE id: 0)
};
AKUNU_PARAMS_SIZE(WhisperChainSlot, 48)

// whisper_chain_rows: one workgroup lays out a step's decoder rows, one per running slot in
// slot order: ids, pos, kv_rows, self_seq, cross_seq, head_rows and row_slot, and both steps'
// n_tokens (0 when no slot runs).
struct WhisperChainRowsParams {
    uint slots;      // slots in the state
    uint n_ctx;      // decoder positions per slot
    uint audio_ctx;  // cross-attention rows per audio window
};
AKUNU_PARAMS_SIZE(WhisperChainRowsParams, 12)

// whisper_pick: per row r < head_step.n_tokens, the logit rules of rules.py (LogitRules.apply)
// over logits [rows, vocab] for slot row_slot[r], then the argmax (lowest id on ties), its
// log-probability under the ruled logits, and the slot's next state; the token and log-prob go
// to column `step` of the slot's row of the outputs [slots, steps].
struct WhisperPickParams {
    uint vocab;
    uint eot;
    uint timestamp_begin;
    uint no_timestamps;
    uint no_speech;    // AKUNU_CHAIN_NONE: none
    uint mask_words;   // u32 words of one slot's suppress bit mask; begin_suppress's follows it
    uint step;         // the chain step this dispatch picks for
    uint steps;        // steps per chain: the outputs' row length
    uint n_ctx;
};
AKUNU_PARAMS_SIZE(WhisperPickParams, 36)

#ifdef __cplusplus
}  // namespace akunu
#endif
#endif  // AKUNU_PARAMS_H
