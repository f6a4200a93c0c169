// Saved model states: the file format of Model::save_state / load_state, and the model
// fingerprint that ties a state to the model that wrote it.
//
// Layout (little-endian, as the host writes it):
//   header   StateHeader, 80 bytes: magic "AKUNUSTATE", format version, fingerprint, KV dtype
//            name, n_layers, n_kv_heads, head_dim, vocab, length, context, payload bytes,
//            sliding_from (0 in states written before it existed, which is what they hold)
//   payload  SamplerState (32 bytes), token u32, logprob f32, logits [vocab] f32,
//            KV rows (KVCache::save_rows(length): per layer, K then V, per head, rows [0, length);
//            sliding-window layers rows [sliding_from, length): a ring holds no more)
//   checksum FNV-1a 64 over header and payload
// The version changes whenever this layout does; an older or newer version is refused, never
// guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "akunu/model/model_config.h"
#include "akunu/formats/model_files.h"

namespace akunu {

constexpr uint32_t kStateFormatVersion = 1;

struct StateHeader {
    char magic[10];  // "AKUNUSTATE"
    uint16_t pad = 0;
    uint32_t version;  // kStateFormatVersion
    uint64_t fingerprint;  // model_fingerprint() of the model that saved it
    char kv_dtype[8];  // kv_dtype_name(), zero-padded
    uint32_t n_layers, n_kv_heads, head_dim, vocab;
    uint32_t length;  // positions saved
    uint32_t context;  // the saving model's context (information: any context >= length loads)
    uint64_t payload_bytes;
    uint32_t sliding_from;  // the first position sliding-window layers hold (KVCache::sliding_from)
    uint8_t reserved[12] = {};
};
static_assert(sizeof(StateHeader) == 80, "the state header is part of the file format");

// A 64-bit hash of what makes a model this model: its config, every tensor's name, type and
// shape, and samples of the weight bytes (the first and last 64 KiB of tensor data and 64 bytes
// from the middle of each tensor, read from the memory map: cheap, and different fine-tunes
// of one shape differ there). Two loads of one file agree; a GGUF and a safetensors copy of a
// model do not (their K heads may be ordered differently).
uint64_t model_fingerprint(const ModelFiles& files, const ModelConfig& c);

// FNV-1a 64, continuing from `hash`.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t hash = 0xcbf29ce484222325ull);

}  // namespace akunu
