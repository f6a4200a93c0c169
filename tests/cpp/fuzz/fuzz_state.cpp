// libFuzzer target: saved model states through Model::load_state, on the CPU backend.
//
// A state file ends with an FNV-1a checksum, which random bytes almost never match; each input
// is therefore tried twice: as it is, and with a correct checksum appended, so that the header
// and payload checks behind the checksum are what the fuzzer explores. After any load that
// succeeds, the model must still decode a token. The model is AKUNU_FUZZ_STATE_MODEL.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/engine/model.h"
#include "akunu/engine/model_state.h"

namespace {

akunu::Model* g_model = nullptr;

void try_load(const uint8_t* data, size_t size) {
    try {
        g_model->load_state(data, size);
    } catch (const akunu::Error&) {
        return;
    }
    if (g_model->kv_cache().current_length() < g_model->context()) g_model->decode(0);
    g_model->reset();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* path = std::getenv("AKUNU_FUZZ_STATE_MODEL");
    if (!path) std::abort();  // scripts/fuzz.sh sets it
    akunu::LoadOptions o;
    o.device = "cpu";
    o.context = 64;
    static std::unique_ptr<akunu::Model> model = akunu::Model::load(path, o);
    g_model = model.get();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try_load(data, size);
    std::vector<uint8_t> sealed(data, data + size);
    const uint64_t checksum = akunu::fnv1a64(data, size);
    sealed.resize(size + sizeof checksum);
    std::memcpy(sealed.data() + size, &checksum, sizeof checksum);
    try_load(sealed.data(), sealed.size());
    return 0;
}
