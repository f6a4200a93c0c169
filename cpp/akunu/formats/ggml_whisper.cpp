// whisper.cpp GGML parsing (ggml_whisper.h gives the layout).
#include "akunu/formats/ggml_whisper.h"

#include <cstring>
#include <set>

#include "akunu/core/error.h"
#include "akunu/formats/byte_reader.h"

namespace akunu {

namespace {

constexpr int kMaxDims = 4;
constexpr int kMaxNameBytes = 512;
constexpr uint32_t kMaxTokenBytes = 1024;
constexpr int kFilterBins = 201;  // n_fft / 2 + 1 for Whisper's 400-point FFT

// The ggml types whisper.cpp writes and akunu reads.
const std::set<TensorType> kTypes = {TensorType::F32,  TensorType::F16,  TensorType::Q4_0, TensorType::Q4_1,
                                     TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0};

void read_hparams(ByteReader& r, WhisperHparams& h) {
    struct Field {
        const char* name;
        int* value;
        int max;
    };
    const Field fields[] = {
        {"n_vocab", &h.n_vocab, 1 << 20},
        {"n_audio_ctx", &h.n_audio_ctx, 1 << 16},
        {"n_audio_state", &h.n_audio_state, 1 << 16},
        {"n_audio_head", &h.n_audio_head, 1 << 10},
        {"n_audio_layer", &h.n_audio_layer, 1 << 10},
        {"n_text_ctx", &h.n_text_ctx, 1 << 16},
        {"n_text_state", &h.n_text_state, 1 << 16},
        {"n_text_head", &h.n_text_head, 1 << 10},
        {"n_text_layer", &h.n_text_layer, 1 << 10},
        {"n_mels", &h.n_mels, 1 << 10},
        {"ftype", &h.ftype, 1 << 30},
    };
    for (const Field& f : fields) {
        *f.value = r.read<int32_t>(std::string("hyper-parameter ") + f.name);
        if (*f.value < (f.value == &h.ftype ? 0 : 1) || *f.value > f.max)
            r.fail(std::string("hyper-parameter ") + f.name + " = " + std::to_string(*f.value) + " is outside [1, " +
                   std::to_string(f.max) + "]");
    }
}

TensorInfo read_tensor(ByteReader& r, const std::string& path) {
    const int32_t n_dims = r.read<int32_t>("a tensor's n_dims");
    const int32_t name_len = r.read<int32_t>("a tensor's name length");
    const int32_t type_id = r.read<int32_t>("a tensor's type");
    if (n_dims < 1 || n_dims > kMaxDims) r.fail("a tensor has n_dims " + std::to_string(n_dims) + ", expected 1 to 4");
    if (name_len < 1 || name_len > kMaxNameBytes)
        r.fail("a tensor name has length " + std::to_string(name_len) + ", expected 1 to " +
               std::to_string(kMaxNameBytes));
    std::vector<uint64_t> ne;
    for (int i = 0; i < n_dims; ++i) ne.push_back(uint64_t(int64_t(r.read<int32_t>("a tensor dimension"))));
    TensorInfo t;
    t.name = r.bytes(uint64_t(name_len), "a tensor name");
    t.file = path;
    const TensorTypeTraits* type = type_id >= 0 ? find_ggml_type(uint32_t(type_id)) : nullptr;
    if (!type || !kTypes.count(type->type))
        r.fail("tensor " + t.name + " has ggml type " + std::to_string(type_id) +
               ", akunu reads f32, f16, q4_0, q4_1, q5_0, q5_1 and q8_0 in whisper.cpp files");
    t.type = type;
    uint64_t n = 1;
    for (auto it = ne.rbegin(); it != ne.rend(); ++it) {
        if (*it == 0 || *it > (1u << 30)) r.fail("tensor " + t.name + " has dimension " + std::to_string(int64_t(*it)));
        n *= *it;
        if (n > (uint64_t(1) << 40)) r.fail("tensor " + t.name + ": element count exceeds 2^40");
        t.shape.push_back(*it);
    }
    if (ne[0] % type->block_size != 0)
        r.fail("tensor " + t.name + ": rows of " + std::to_string(ne[0]) + " are not a whole number of " + type->name +
               " blocks of " + std::to_string(type->block_size));
    t.n_elements = n;
    t.bytes = tensor_bytes(*type, n, t.name);
    t.data = r.take(t.bytes, "the data of tensor " + t.name);
    return t;
}

}  // namespace

bool GgmlWhisperFile::looks_like(const MappedFile& file) {
    if (file.size() < 56 || std::memcmp(file.data(), "lmgg", 4) != 0) return false;
    int32_t n_mels, filter_rows;
    std::memcpy(&n_mels, file.data() + 4 + 9 * 4, 4);
    std::memcpy(&filter_rows, file.data() + 4 + 11 * 4, 4);
    return n_mels == filter_rows;
}

std::shared_ptr<GgmlWhisperFile> GgmlWhisperFile::open(std::shared_ptr<MappedFile> file) {
    auto g = std::shared_ptr<GgmlWhisperFile>(new GgmlWhisperFile());
    g->file_ = file;
    ByteReader r(*file, "whisper.cpp GGML file");
    if (r.bytes(4, "the magic") != "lmgg") r.fail("the magic is not \"lmgg\" (0x67676d6c)");
    read_hparams(r, g->h_);
    const int32_t n_mel = r.read<int32_t>("the mel filter count");
    g->n_fft_ = r.read<int32_t>("the mel filter length");
    if (n_mel != g->h_.n_mels || g->n_fft_ != kFilterBins)
        r.fail("the mel filter bank is [" + std::to_string(n_mel) + ", " + std::to_string(g->n_fft_) + "], expected [" +
               std::to_string(g->h_.n_mels) + ", " + std::to_string(kFilterBins) + "]");
    const size_t n_filter = size_t(n_mel) * size_t(g->n_fft_);
    g->filters_.resize(n_filter);
    std::memcpy(g->filters_.data(), r.take(n_filter * 4, "the mel filter bank"), n_filter * 4);

    const int32_t n_tokens = r.read<int32_t>("the vocabulary size");
    if (n_tokens < 1 || n_tokens > g->h_.n_vocab)
        r.fail("the vocabulary holds " + std::to_string(n_tokens) +
               " tokens, expected 1 to n_vocab = " + std::to_string(g->h_.n_vocab));
    for (int32_t i = 0; i < n_tokens; ++i) {
        const uint32_t len = r.read<uint32_t>("the length of token " + std::to_string(i));
        if (len > kMaxTokenBytes)
            r.fail("token " + std::to_string(i) + " is " + std::to_string(len) + " bytes, at most " +
                   std::to_string(kMaxTokenBytes));
        g->tokens_.push_back(r.bytes(len, "token " + std::to_string(i)));
    }
    std::set<std::string> names;
    while (!r.at_end()) {
        TensorInfo t = read_tensor(r, file->path());
        if (!names.insert(t.name).second) r.fail("duplicate tensor " + t.name);
        g->tensors_.push_back(std::move(t));
    }
    return g;
}

}  // namespace akunu
