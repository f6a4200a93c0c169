/* akunu's C API: opaque handles, status codes, and akunu_last_error() for the message.
 *
 *   akunu_model* m = NULL;
 *   if (akunu_model_create("model.gguf", 2048, &m) != AKUNU_OK) puts(akunu_last_error());
 *   akunu_model_eval(m, ids, n_ids);
 *   const float* logits = akunu_model_logits(m);    // vocab floats, valid until the next call
 *   akunu_model_free(m);
 *
 * No function aborts the process; every failure returns a status and sets the message.
 */
#ifndef AKUNU_H
#define AKUNU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { AKUNU_OK = 0, AKUNU_ERROR = 1, AKUNU_INVALID_ARGUMENT = 2 } akunu_status;

typedef struct akunu_model akunu_model;

/* The message of the last failure on this thread ("" when none). */
const char* akunu_last_error(void);

akunu_status akunu_model_create(const char* path, int context, akunu_model** out);
void akunu_model_free(akunu_model* model);

akunu_status akunu_model_eval(akunu_model* model, const int32_t* ids, size_t n_ids);
/* Greedy generation: up to max_tokens ids after the cache contents, stopping at EOS. */
akunu_status akunu_model_generate(akunu_model* model, int32_t* out_ids, size_t max_tokens, size_t* n_out);
const float* akunu_model_logits(akunu_model* model); /* NULL when not host-visible */
int akunu_model_vocab_size(const akunu_model* model);
int akunu_model_kv_length(const akunu_model* model);
void akunu_model_reset(akunu_model* model);

#ifdef __cplusplus
}
#include <memory>
namespace akunu {
struct ModelDeleter {
    void operator()(akunu_model* m) const { akunu_model_free(m); }
};
using UniqueModel = std::unique_ptr<akunu_model, ModelDeleter>; /* for C++ users */
}  // namespace akunu
#endif
#endif /* AKUNU_H */
