/* akunu's C API: opaque handles, status codes, and akunu_last_error() for the message.
 *
 *   akunu_model* m = NULL;
 *   if (akunu_model_create("model.gguf", 2048, &m) != AKUNU_OK) puts(akunu_last_error());
 *   int32_t ids[256]; size_t n = 0;
 *   akunu_model_tokenize(m, "Hello", 5, 1, ids, 256, &n);
 *   akunu_model_eval(m, ids, n);
 *   const float* logits = akunu_model_logits(m);    // vocab floats, valid until the next call
 *   akunu_model_generate(m, ids, 64, &n);           // stops at the tokenizer's stop ids
 *   akunu_model_free(m);
 *
 * No function aborts the process; every failure returns a status and sets the message. A
 * handle is used by one thread at a time: a second thread's call on the same handle fails with
 * AKUNU_ERROR and a message that says so; different handles are independent.
 */
#ifndef AKUNU_H
#define AKUNU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* AKUNU_BUFFER_TOO_SMALL: an output array was too short; the count it needs is still reported. */
typedef enum { AKUNU_OK = 0, AKUNU_ERROR = 1, AKUNU_INVALID_ARGUMENT = 2, AKUNU_BUFFER_TOO_SMALL = 3 } akunu_status;

typedef struct akunu_model akunu_model;

/* The message of the last failure on this thread ("" when none). */
const char* akunu_last_error(void);

akunu_status akunu_model_create(const char* path, int context, akunu_model** out);

/* Where and how akunu_model_create_with loads a model; akunu_model_options_default() gives
 * what akunu_model_create(path, 4096, ...) does. Strings and arrays are read during the call.
 *   context   KV-cache positions (clipped to the model's trained context)
 *   device    a selector as Python's Model(device=...) takes it: "vulkan", "vulkan:1", "cpu";
 *             NULL or "": the default device
 *   devices   n_devices selectors, in layer order: the model split by layers across them
 *             (docs/devices.md); give device or devices, not both
 *   split     n_split layer counts or shares, one per device (NULL: by free memory)
 *   kv_dtype  the KV cache's format: "f16", "q8", "int4", "int4h", "fp4h", "q8/int4", ..., a quantized one
 *             with a recent window in f16 as "int4h+w8" (NULL: f16)
 *   tuning    "key=value,..." over AKUNU_TUNE (docs/configuration.md; NULL: none) */
typedef struct {
    int context;
    const char* device;
    const char* const* devices;
    size_t n_devices;
    const double* split;
    size_t n_split;
    const char* kv_dtype;
    const char* tuning;
} akunu_model_options;
akunu_model_options akunu_model_options_default(void);
akunu_status akunu_model_create_with(const char* path, const akunu_model_options* options, akunu_model** out);
void akunu_model_free(akunu_model* model);

akunu_status akunu_model_eval(akunu_model* model, const int32_t* ids, size_t n_ids);
/* Up to max_tokens ids after the cache contents, drawn by the model's sampling settings (greedy
 * by default), stopping after a stop id (included in out_ids) or when the context is full. */
akunu_status akunu_model_generate(akunu_model* model, int32_t* out_ids, size_t max_tokens, size_t* n_out);
const float* akunu_model_logits(akunu_model* model); /* NULL when not host-visible */
int akunu_model_vocab_size(const akunu_model* model);
int akunu_model_kv_length(const akunu_model* model);
void akunu_model_reset(akunu_model* model);

/* Sampling: temperature 0 is greedy; top_k 0, top_p 1 and min_p 0 are off. The draws are keyed
 * by (seed, position), so a seed repeats its tokens. */
typedef struct {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
    uint64_t seed;
} akunu_sampling;
akunu_sampling akunu_sampling_greedy(void);
akunu_status akunu_model_set_sampling(akunu_model* model, const akunu_sampling* sampling);

/* The ids that end akunu_model_generate: by default the tokenizer's stop ids (its EOS ids and
 * chat end markers such as <|im_end|> or <|eot_id|>). set replaces them (n 0: never stop);
 * get writes up to cap of them and reports how many there are in *n. */
akunu_status akunu_model_set_stop_ids(akunu_model* model, const int32_t* ids, size_t n);
akunu_status akunu_model_stop_ids(const akunu_model* model, int32_t* out, size_t cap, size_t* n);

/* Text <-> ids with the model's own tokenizer (the GGUF's vocabulary or the tokenizer.json
 * beside the weights). tokenize: UTF-8 text of len bytes; *n is the count of ids the text
 * needs (AKUNU_BUFFER_TOO_SMALL when it exceeds cap). detokenize: *n is the count of bytes of
 * text; out gets them and a terminating NUL when n + 1 <= cap. */
akunu_status akunu_model_tokenize(akunu_model* model, const char* text, size_t len, int add_special, int32_t* out,
                                  size_t cap, size_t* n);
akunu_status akunu_model_detokenize(akunu_model* model, const int32_t* ids, size_t n_ids, int skip_special, char* out,
                                    size_t cap, size_t* n);

/* Device memory the model holds now, in bytes. */
typedef struct {
    uint64_t weights;
    uint64_t kv_cache;
    uint64_t scratch;
    uint64_t total;
} akunu_memory;
akunu_status akunu_model_memory(const akunu_model* model, akunu_memory* out);

/* Sentence embeddings from an encoder model (BERT family): one vector of akunu_encoder_dim()
 * floats per text into out[n_texts * dim]. pooling 0: mean over the tokens, 1: the [CLS] row.
 * A text longer than the model's positions is an error naming it (nothing is written). */
typedef struct akunu_encoder akunu_encoder;
akunu_status akunu_encoder_create(const char* path, akunu_encoder** out);
void akunu_encoder_free(akunu_encoder* encoder);
int akunu_encoder_dim(const akunu_encoder* encoder);
akunu_status akunu_encoder_embed(akunu_encoder* encoder, const char* const* texts, size_t n_texts, int pooling,
                                 int normalize, float* out);

#ifdef __cplusplus
}
#include <memory>
namespace akunu {
struct ModelDeleter {
    void operator()(akunu_model* m) const { akunu_model_free(m); }
};
using UniqueModel = std::unique_ptr<akunu_model, ModelDeleter>; /* for C++ users */
struct EncoderDeleter {
    void operator()(akunu_encoder* e) const { akunu_encoder_free(e); }
};
using UniqueEncoder = std::unique_ptr<akunu_encoder, EncoderDeleter>;
}  // namespace akunu
#endif
#endif /* AKUNU_H */
