// Tokenizer::from_gguf: the same pipeline built from llama.cpp's tokenizer metadata.
//
// tokenizer.ggml.model "gpt2" is byte-level BPE; tokenizer.ggml.pre names the pre-tokenizer
// regex (llama3's, qwen2's or GPT-2's) exactly as the HF tokenizer.json it was converted from.
// "llama" is SentencePiece-style BPE with byte fallback, whose merge order is the vocabulary's
// scores (higher first), as llama.cpp's SPM tokenizer applies it.
#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "akunu/core/error.h"
#include "akunu/formats/gguf.h"
#include "akunu/tokenizer/tokenizer.h"

namespace akunu {

namespace {

const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// llama.cpp token types (llama_token_type).
enum { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

std::vector<std::string> strings(const GgufFile& g, const char* key, bool required) {
    const GgufValue* v = g.find(key);
    if (!v) {
        AKUNU_CHECK(!required, g.path() + ": metadata key " + key + " is missing");
        return {};
    }
    std::vector<std::string> out;
    for (const auto& item : v->as_array(key).items) out.push_back(item.as_string(key));
    return out;
}

int integer_or(const GgufFile& g, const char* key, int fallback) {
    const GgufValue* v = g.find(key);
    return v ? int(v->as_int(key)) : fallback;
}

// tokenizer.ggml.model "bert": llama.cpp's converter stores a WordPiece vocabulary in its
// "phantom space" spelling: control tokens as they are, "##x" continuations as "x", and
// word-initial tokens as "\u2581x". Undoing that gives back HF's vocabulary. llama.cpp
// always lowercases and strips accents for this model (the file has no key saying
// otherwise), so the normalizer does too; the template is [CLS] ... [SEP] whatever the
// add_bos/add_eos flags say (an encoder is trained with both).
std::unique_ptr<SubwordModel> bert_wordpiece(const GgufFile& g, const std::vector<std::string>& tokens,
                                             const std::vector<int>& types, Tokenizer::Parts& p) {
    static const std::string kPhantom = "\xE2\x96\x81";
    const int unk = integer_or(g, "tokenizer.ggml.unknown_token_id", -1);
    AKUNU_CHECK(unk >= 0 && unk < int(tokens.size()),
                g.path() + ": metadata key tokenizer.ggml.unknown_token_id is missing or outside the vocabulary");
    std::unordered_map<std::string, int> vocab;
    vocab.reserve(tokens.size());
    std::string unk_token;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string& t = tokens[i];
        std::string hf;
        if (types[i] == kControl || types[i] == kUserDefined)
            hf = t;
        else if (t.compare(0, kPhantom.size(), kPhantom) == 0)
            hf = t.substr(kPhantom.size());
        else
            hf = "##" + t;
        if (int(i) == unk) unk_token = hf;
        vocab.emplace(std::move(hf), int(i));
    }
    // The converter stores [CLS] as BOS and [SEP] as EOS and as the separator (llama.cpp's
    // spelling); llama.cpp's own BERT files may carry only cls_token_id and seperator_token_id.
    const int cls = integer_or(g, "tokenizer.ggml.cls_token_id", integer_or(g, "tokenizer.ggml.bos_token_id", -1));
    const int sep =
        integer_or(g, "tokenizer.ggml.seperator_token_id", integer_or(g, "tokenizer.ggml.eos_token_id", -1));
    for (const auto& [key, id] :
         {std::pair{"cls_token_id (or bos_token_id)", cls}, std::pair{"seperator_token_id (or eos_token_id)", sep}})
        AKUNU_CHECK(id >= 0 && id < int(tokens.size()),
                    g.path() + ": metadata key tokenizer.ggml." + key + " is missing or outside the vocabulary");

    p.special_template = {{cls}, {sep}};
    p.normalizer.push_back({NormalizerStep::kBert});
    p.pre_tokenizer.push_back({PreTokenizerStep::kBert});
    p.decoder.push_back({DecoderStep::kWordPiece});
    return std::make_unique<WordPieceModel>(std::move(vocab), unk_token, "##", 100, g.path());
}

// GPT-2 style byte-level BPE: merges as stored, and the pre-tokenizer tokenizer.ggml.pre names.
void gpt2_bpe(const GgufFile& g, Tokenizer::Parts& p, BpeOptions& o,
              std::vector<std::pair<std::string, std::string>>& merges) {
    for (const std::string& m : strings(g, "tokenizer.ggml.merges", true)) {
        const size_t space = m.find(' ', 1);
        AKUNU_CHECK(space != std::string::npos, g.path() + ": tokenizer.ggml.merges entry '" + m + "' is not \"a b\"");
        merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    const GgufValue* pre_key = g.find("tokenizer.ggml.pre");
    const std::string pre = pre_key ? pre_key->as_string("tokenizer.ggml.pre") : "default";
    PreTokenizerStep byte_level{PreTokenizerStep::kByteLevel};
    if (pre == "llama-bpe" || pre == "llama3") {
        p.pre_tokenizer.push_back({PreTokenizerStep::kSplit, std::make_shared<Regex>(kLlama3Pattern)});
        o.ignore_merges = true;
    } else if (pre == "qwen2") {
        p.normalizer.push_back({NormalizerStep::kNfc});
        p.pre_tokenizer.push_back({PreTokenizerStep::kSplit, std::make_shared<Regex>(kQwen2Pattern)});
    } else if (pre == "default" || pre == "gpt-2" || pre == "gpt2") {
        byte_level.use_regex = true;
    } else if (pre == "smollm") {
        // HF: Digits(individual_digits) then ByteLevel with GPT-2's regex.
        p.pre_tokenizer.push_back({PreTokenizerStep::kSplit, std::make_shared<Regex>("\\p{N}")});
        byte_level.use_regex = true;
    } else {
        throw Error(g.path() + ": tokenizer.ggml.pre '" + pre + "' is not supported (llama-bpe, qwen2, smollm, gpt-2)");
    }
    p.pre_tokenizer.push_back(byte_level);
    p.decoder.push_back({DecoderStep::kByteLevel});
}

// SentencePiece pieces are short (sentencepiece's default max_piece_length is 16 characters);
// each cut of a token is looked up, so a token of L bytes costs O(L^2) to load.
constexpr size_t kMaxSpmTokenBytes = 512;

// SentencePiece BPE: a pair merges when the joined string is a token; higher score first.
void llama_spm(const GgufFile& g, const std::vector<std::string>& tokens, const std::vector<int>& types,
               const std::unordered_map<std::string, int>& vocab, Tokenizer::Parts& p, BpeOptions& o,
               std::vector<std::pair<std::string, std::string>>& merges) {
    const GgufValue* scores_key = g.find("tokenizer.ggml.scores");
    AKUNU_CHECK(scores_key, g.path() + ": metadata key tokenizer.ggml.scores is missing");
    const auto& scores = scores_key->as_array("tokenizer.ggml.scores").items;
    AKUNU_CHECK(scores.size() == tokens.size(), g.path() + ": tokenizer.ggml.scores does not match the token count");
    struct Cand {
        double score;
        std::string a, b;
    };
    std::unordered_set<std::string_view> known;  // views of the vocabulary: lookups copy nothing
    known.reserve(vocab.size());
    for (const auto& [token, id] : vocab) known.insert(token);
    std::vector<Cand> cands;
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (types[i] != kNormal) continue;
        const std::string_view t = tokens[i];
        AKUNU_CHECK(t.size() <= kMaxSpmTokenBytes, g.path() + ": tokenizer.ggml.tokens[" + std::to_string(i) + "] is " +
                                                       std::to_string(t.size()) +
                                                       " bytes long; akunu reads SentencePiece tokens of up to " +
                                                       std::to_string(kMaxSpmTokenBytes) + " bytes");
        for (size_t cut = 1; cut < t.size(); ++cut) {
            if ((uint8_t(t[cut]) & 0xC0) == 0x80) continue;  // only at character boundaries
            if (known.count(t.substr(0, cut)) && known.count(t.substr(cut)))
                cands.push_back(
                    {scores[i].as_double("scores"), std::string(t.substr(0, cut)), std::string(t.substr(cut))});
        }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& x, const Cand& y) { return x.score > y.score; });
    for (auto& c : cands) merges.emplace_back(std::move(c.a), std::move(c.b));
    o.byte_fallback = true;
    o.fuse_unk = true;
    o.unk_id = integer_or(g, "tokenizer.ggml.unknown_token_id", -1);
    const bool add_space = g.find("tokenizer.ggml.add_space_prefix")
                               ? g.find("tokenizer.ggml.add_space_prefix")->as_bool("tokenizer.ggml.add_space_prefix")
                               : true;
    if (add_space) p.normalizer.push_back({NormalizerStep::kPrepend, "", nullptr, "\xE2\x96\x81"});
    p.normalizer.push_back({NormalizerStep::kReplace, " ", nullptr, "\xE2\x96\x81"});
    p.decoder.push_back({DecoderStep::kReplace, "\xE2\x96\x81", " "});
    p.decoder.push_back({DecoderStep::kByteFallback});
    p.decoder.push_back({DecoderStep::kFuse});
    if (add_space) p.decoder.push_back({DecoderStep::kStrip, "", " ", 1, 0});
}

}  // namespace

std::shared_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& g) {
    const GgufValue* model_key = g.find("tokenizer.ggml.model");
    AKUNU_CHECK(model_key, g.path() + ": metadata key tokenizer.ggml.model is missing; the file has no tokenizer");
    const std::string model = model_key->as_string("tokenizer.ggml.model");
    const std::vector<std::string> tokens = strings(g, "tokenizer.ggml.tokens", true);
    std::vector<int> types(tokens.size(), kNormal);
    if (const GgufValue* t = g.find("tokenizer.ggml.token_type")) {
        const auto& items = t->as_array("tokenizer.ggml.token_type").items;
        AKUNU_CHECK(items.size() == tokens.size(), g.path() + ": tokenizer.ggml.token_type has " +
                                                       std::to_string(items.size()) + " entries for " +
                                                       std::to_string(tokens.size()) + " tokens");
        for (size_t i = 0; i < items.size(); ++i) types[i] = int(items[i].as_int("tokenizer.ggml.token_type"));
    }

    Parts p;
    p.source = g.path();
    std::unordered_map<std::string, int> vocab;
    vocab.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (types[i] == kControl || types[i] == kUserDefined) {
            AddedToken a;
            a.id = int(i);
            a.content = tokens[i];
            a.special = types[i] == kControl;
            if (!a.content.empty()) p.added.push_back(a);
        }
        vocab.emplace(tokens[i], int(i));  // HF keeps added tokens in the model vocab too
    }

    BpeOptions o;
    std::vector<std::pair<std::string, std::string>> merges;
    if (model == "gpt2") {
        gpt2_bpe(g, p, o, merges);
    } else if (model == "llama") {
        llama_spm(g, tokens, types, vocab, p, o, merges);
    } else if (model == "bert") {
        p.model = bert_wordpiece(g, tokens, types, p);
    } else {
        throw Error(g.path() + ": tokenizer.ggml.model '" + model + "' is not supported yet (gpt2, llama, bert)");
    }
    if (!p.model) p.model = std::make_unique<BpeModel>(std::move(vocab), merges, o, g.path());

    p.bos_id = integer_or(g, "tokenizer.ggml.bos_token_id", -1);
    p.eos_id = integer_or(g, "tokenizer.ggml.eos_token_id", -1);
    if (model == "bert") {  // [CLS] and [SEP], wherever the file keeps them
        if (p.bos_id < 0) p.bos_id = p.special_template.prefix.front();
        if (p.eos_id < 0) p.eos_id = p.special_template.suffix.front();
    }
    for (int id : {p.bos_id, p.eos_id})
        AKUNU_CHECK(id < int(tokens.size()),
                    g.path() + ": BOS/EOS id " + std::to_string(id) + " is outside the vocabulary");
    if (const GgufValue* e = g.find("tokenizer.ggml.eos_token_ids"))
        for (const auto& id : e->as_array("tokenizer.ggml.eos_token_ids").items)
            p.extra_eos_ids.push_back(int(id.as_int("eos")));
    auto flag = [&](const char* key, bool fallback) {
        const GgufValue* v = g.find(key);
        return v ? v->as_bool(key) : fallback;
    };
    if (model != "bert") {  // bert's template is [CLS] ... [SEP], set above
        if (flag("tokenizer.ggml.add_bos_token", model == "llama") && p.bos_id >= 0)
            p.special_template.prefix.push_back(p.bos_id);
        if (flag("tokenizer.ggml.add_eos_token", false) && p.eos_id >= 0) p.special_template.suffix.push_back(p.eos_id);
    }
    if (const GgufValue* t = g.find("tokenizer.chat_template"))
        p.chat_template = t->as_string("tokenizer.chat_template");
    return std::make_shared<Tokenizer>(std::move(p));
}

}  // namespace akunu
