// Tokenizer::from_json: the pipeline described by a Hugging Face tokenizer.json, plus the
// chat template and special-token names from tokenizer_config.json.
#include <functional>

#include "akunu/core/error.h"
#include "akunu/tokenizer/tokenizer.h"

namespace akunu {

namespace {

using json = nlohmann::json;

class Reader {
public:
    explicit Reader(std::string source) : source_(std::move(source)) {}
    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw Error(source_ + ": " + field + ": " + what);
    }
    const json& object(const json& j, const std::string& field) const {
        if (!j.is_object()) fail(field, "expected an object, found " + std::string(j.type_name()));
        return j;
    }
    std::string string(const json& j, const char* key, const std::string& field, const char* fallback = nullptr) const {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) {
            if (fallback) return fallback;
            fail(field + "." + key, "missing");
        }
        if (!it->is_string()) fail(field + "." + key, "expected a string, found " + std::string(it->type_name()));
        return it->get<std::string>();
    }
    bool boolean(const json& j, const char* key, bool fallback) const {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return fallback;
        if (!it->is_boolean()) fail(key, "expected true or false");
        return it->get<bool>();
    }
    const std::string& source() const { return source_; }

private:
    std::string source_;
};

// {"String": "x"} or {"Regex": "..."}
void read_pattern(const Reader& r, const json& p, const std::string& field, std::string* literal,
                  std::shared_ptr<const Regex>* regex) {
    r.object(p, field);
    if (p.contains("String"))
        *literal = r.string(p, "String", field);
    else if (p.contains("Regex"))
        *regex = std::make_shared<Regex>(r.string(p, "Regex", field));
    else
        r.fail(field, "expected {\"String\": ...} or {\"Regex\": ...}");
}

PrependScheme read_prepend_scheme(const Reader& r, const json& j, const std::string& field) {
    if (j.contains("prepend_scheme")) {
        const std::string s = r.string(j, "prepend_scheme", field);
        if (s == "always") return PrependScheme::kAlways;
        if (s == "first") return PrependScheme::kFirst;
        if (s == "never") return PrependScheme::kNever;
        r.fail(field + ".prepend_scheme", "unknown value '" + s + "'");
    }
    return r.boolean(j, "add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

void read_normalizer(const Reader& r, const json& j, const std::string& field, std::vector<NormalizerStep>& out) {
    if (j.is_null()) return;
    r.object(j, field);
    const std::string type = r.string(j, "type", field);
    if (type == "Sequence") {
        if (!j.contains("normalizers") || !j["normalizers"].is_array())
            r.fail(field + ".normalizers", "expected a list");
        for (size_t i = 0; i < j["normalizers"].size(); ++i)
            read_normalizer(r, j["normalizers"][i], field + ".normalizers[" + std::to_string(i) + "]", out);
    } else if (type == "NFC")
        out.push_back({NormalizerStep::kNfc});
    else if (type == "NFD")
        out.push_back({NormalizerStep::kNfd});
    else if (type == "NFKC")
        out.push_back({NormalizerStep::kNfkc});
    else if (type == "NFKD")
        out.push_back({NormalizerStep::kNfkd});
    else if (type == "Lowercase")
        out.push_back({NormalizerStep::kLowercase});
    else if (type == "Prepend") {
        NormalizerStep s{NormalizerStep::kPrepend};
        s.content = r.string(j, "prepend", field);
        out.push_back(s);
    } else if (type == "Replace") {
        NormalizerStep s{NormalizerStep::kReplace};
        if (!j.contains("pattern")) r.fail(field + ".pattern", "missing");
        read_pattern(r, j["pattern"], field + ".pattern", &s.pattern, &s.regex);
        s.content = r.string(j, "content", field);
        out.push_back(s);
    } else if (type == "Strip") {
        NormalizerStep s{NormalizerStep::kStrip};
        s.left = r.boolean(j, "strip_left", true);
        s.right = r.boolean(j, "strip_right", true);
        out.push_back(s);
    } else if (type == "BertNormalizer") {
        NormalizerStep s{NormalizerStep::kBert};
        s.bert.clean_text = r.boolean(j, "clean_text", true);
        s.bert.handle_chinese_chars = r.boolean(j, "handle_chinese_chars", true);
        s.bert.lowercase = r.boolean(j, "lowercase", true);
        s.bert.strip_accents = r.boolean(j, "strip_accents", s.bert.lowercase);  // null: as lowercase
        out.push_back(s);
    } else {
        r.fail(field + ".type", "normalizer '" + type +
                                    "' is not supported (NFC, NFD, NFKC, NFKD, Lowercase, Prepend, "
                                    "Replace, Strip, BertNormalizer, Sequence)");
    }
}

SplitBehavior read_behavior(const Reader& r, const json& j, const std::string& field) {
    const std::string b = r.string(j, "behavior", field, "Isolated");
    if (b == "Removed") return SplitBehavior::kRemoved;
    if (b == "Isolated") return SplitBehavior::kIsolated;
    if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (b == "Contiguous") return SplitBehavior::kContiguous;
    r.fail(field + ".behavior", "unknown split behavior '" + b + "'");
}

void read_pre_tokenizer(const Reader& r, const json& j, const std::string& field, std::vector<PreTokenizerStep>& out) {
    if (j.is_null()) return;
    r.object(j, field);
    const std::string type = r.string(j, "type", field);
    if (type == "Sequence") {
        if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
            r.fail(field + ".pretokenizers", "expected a list");
        for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
            read_pre_tokenizer(r, j["pretokenizers"][i], field + ".pretokenizers[" + std::to_string(i) + "]", out);
    } else if (type == "Split") {
        PreTokenizerStep s{PreTokenizerStep::kSplit};
        if (!j.contains("pattern")) r.fail(field + ".pattern", "missing");
        read_pattern(r, j["pattern"], field + ".pattern", &s.literal, &s.regex);
        s.behavior = read_behavior(r, j, field);
        s.invert = r.boolean(j, "invert", false);
        out.push_back(s);
    } else if (type == "ByteLevel") {
        PreTokenizerStep s{PreTokenizerStep::kByteLevel};
        s.add_prefix_space = r.boolean(j, "add_prefix_space", true);
        s.use_regex = r.boolean(j, "use_regex", true);
        out.push_back(s);
    } else if (type == "Metaspace") {
        PreTokenizerStep s{PreTokenizerStep::kMetaspace};
        s.replacement = r.string(j, "replacement", field, "\xE2\x96\x81");
        s.prepend = read_prepend_scheme(r, j, field);
        s.split = r.boolean(j, "split", true);
        out.push_back(s);
    } else if (type == "WhitespaceSplit") {
        out.push_back({PreTokenizerStep::kWhitespaceSplit});
    } else if (type == "BertPreTokenizer") {
        out.push_back({PreTokenizerStep::kBert});
    } else {
        r.fail(field + ".type", "pre-tokenizer '" + type +
                                    "' is not supported (Split, ByteLevel, Metaspace, "
                                    "WhitespaceSplit, BertPreTokenizer, Sequence)");
    }
}

void read_decoder(const Reader& r, const json& j, const std::string& field, std::vector<DecoderStep>& out) {
    if (j.is_null()) return;
    r.object(j, field);
    const std::string type = r.string(j, "type", field);
    if (type == "Sequence") {
        if (!j.contains("decoders") || !j["decoders"].is_array()) r.fail(field + ".decoders", "expected a list");
        for (size_t i = 0; i < j["decoders"].size(); ++i)
            read_decoder(r, j["decoders"][i], field + ".decoders[" + std::to_string(i) + "]", out);
    } else if (type == "ByteLevel")
        out.push_back({DecoderStep::kByteLevel});
    else if (type == "ByteFallback")
        out.push_back({DecoderStep::kByteFallback});
    else if (type == "Fuse")
        out.push_back({DecoderStep::kFuse});
    else if (type == "Replace") {
        DecoderStep s{DecoderStep::kReplace};
        std::shared_ptr<const Regex> regex;
        if (!j.contains("pattern")) r.fail(field + ".pattern", "missing");
        read_pattern(r, j["pattern"], field + ".pattern", &s.pattern, &regex);
        if (regex) r.fail(field + ".pattern", "regex replacement in a decoder is not supported");
        s.content = r.string(j, "content", field);
        out.push_back(s);
    } else if (type == "Strip") {
        DecoderStep s{DecoderStep::kStrip};
        s.content = r.string(j, "content", field);
        s.start = j.value("start", 0);
        s.stop = j.value("stop", 0);
        out.push_back(s);
    } else if (type == "Metaspace") {
        DecoderStep s{DecoderStep::kMetaspace};
        s.replacement = r.string(j, "replacement", field, "\xE2\x96\x81");
        s.prepend = read_prepend_scheme(r, j, field);
        out.push_back(s);
    } else if (type == "WordPiece") {
        DecoderStep s{DecoderStep::kWordPiece};
        s.prefix = r.string(j, "prefix", field, "##");
        s.cleanup = r.boolean(j, "cleanup", true);
        out.push_back(s);
    } else {
        r.fail(field + ".type", "decoder '" + type +
                                    "' is not supported (ByteLevel, ByteFallback, Fuse, Replace, Strip, "
                                    "Metaspace, WordPiece, Sequence)");
    }
}

void read_post_processor(const Reader& r, const json& j, const std::string& field, SpecialTemplate& t) {
    if (j.is_null()) return;
    r.object(j, field);
    const std::string type = r.string(j, "type", field);
    if (type == "Sequence") {
        if (!j.contains("processors") || !j["processors"].is_array()) r.fail(field + ".processors", "expected a list");
        for (size_t i = 0; i < j["processors"].size(); ++i)
            read_post_processor(r, j["processors"][i], field + ".processors[" + std::to_string(i) + "]", t);
    } else if (type == "ByteLevel") {
        // Offsets only; ids are unchanged.
    } else if (type == "TemplateProcessing") {
        if (!j.contains("single") || !j["single"].is_array()) r.fail(field + ".single", "expected a list");
        const json& specials = j.contains("special_tokens") ? j["special_tokens"] : json::object();
        bool after = false;
        for (const json& item : j["single"]) {
            if (item.contains("Sequence")) {
                after = true;
                continue;
            }
            if (!item.contains("SpecialToken")) r.fail(field + ".single", "items must be Sequence or SpecialToken");
            const std::string name = r.string(item["SpecialToken"], "id", field + ".single");
            if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
                r.fail(field + ".special_tokens", "no ids for '" + name + "'");
            for (const json& id : specials[name]["ids"]) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
                    r.fail(field + ".special_tokens." + name, "ids must be token ids in [0, 2^24]");
                (after ? t.suffix : t.prefix).push_back(int(id.get<int64_t>()));
            }
        }
    } else if (type == "BertProcessing") {  // {"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}
        for (const char* key : {"cls", "sep"}) {
            if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][1].is_number_integer() ||
                j[key][1].get<int64_t>() < 0 || j[key][1].get<int64_t>() > (1 << 24))
                r.fail(field + "." + key, "expected [token, id] with an id in [0, 2^24]");
            (key[0] == 'c' ? t.prefix : t.suffix).push_back(int(j[key][1].get<int64_t>()));
        }
    } else {
        r.fail(field + ".type", "post-processor '" + type +
                                    "' is not supported (TemplateProcessing, BertProcessing, "
                                    "ByteLevel, Sequence)");
    }
}

std::unordered_map<std::string, int> read_vocab(const Reader& r, const json& j) {
    if (!j.contains("vocab") || !j["vocab"].is_object()) r.fail("model.vocab", "expected an object {token: id}");
    std::unordered_map<std::string, int> vocab;
    vocab.reserve(j["vocab"].size());
    for (auto it = j["vocab"].begin(); it != j["vocab"].end(); ++it) {
        if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 24))
            r.fail("model.vocab." + it.key(), "expected a token id in [0, 2^24]");
        vocab.emplace(it.key(), it->get<int>());
    }
    return vocab;
}

std::unique_ptr<SubwordModel> read_model(const Reader& r, const json& j, const std::vector<AddedToken>& added) {
    r.object(j, "model");
    const std::string type = r.string(j, "type", "model", "BPE");
    if (type == "WordPiece") {
        const auto max_chars = j.value("max_input_chars_per_word", 100);
        return std::make_unique<WordPieceModel>(read_vocab(r, j), r.string(j, "unk_token", "model", "[UNK]"),
                                                r.string(j, "continuing_subword_prefix", "model", "##"), max_chars,
                                                r.source());
    }
    if (type != "BPE") r.fail("model.type", "model '" + type + "' is not supported yet (BPE, WordPiece)");
    std::unordered_map<std::string, int> vocab = read_vocab(r, j);
    std::vector<std::pair<std::string, std::string>> merges;
    if (j.contains("merges")) {
        if (!j["merges"].is_array()) r.fail("model.merges", "expected a list");
        merges.reserve(j["merges"].size());
        for (size_t i = 0; i < j["merges"].size(); ++i) {
            const json& m = j["merges"][i];
            if (m.is_string()) {  // "a b" (older files)
                const std::string s = m.get<std::string>();
                const size_t space = s.find(' ', 1);
                if (space == std::string::npos) r.fail("model.merges[" + std::to_string(i) + "]", "expected \"a b\"");
                merges.emplace_back(s.substr(0, space), s.substr(space + 1));
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
            } else {
                r.fail("model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [\"a\", \"b\"]");
            }
        }
    }
    BpeOptions o;
    o.byte_fallback = r.boolean(j, "byte_fallback", false);
    o.ignore_merges = r.boolean(j, "ignore_merges", false);
    o.fuse_unk = r.boolean(j, "fuse_unk", false);
    o.continuing_subword_prefix = r.string(j, "continuing_subword_prefix", "model", "");
    o.end_of_word_suffix = r.string(j, "end_of_word_suffix", "model", "");
    const std::string unk = r.string(j, "unk_token", "model", "");
    if (!unk.empty()) {
        auto it = vocab.find(unk);
        if (it != vocab.end()) o.unk_id = it->second;
        for (const auto& a : added)
            if (a.content == unk) o.unk_id = a.id;
        if (o.unk_id < 0) r.fail("model.unk_token", "'" + unk + "' is not in the vocabulary");
    }
    return std::make_unique<BpeModel>(std::move(vocab), merges, o, r.source());
}

std::string special_token_name(const json* config, const char* key) {
    if (!config || !config->contains(key)) return "";
    const json& v = (*config)[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return "";
}

}  // namespace

std::shared_ptr<Tokenizer> Tokenizer::from_json(const json& j, const json* config, const std::string& source) {
    Reader r(source);
    r.object(j, "tokenizer.json");
    Parts p;
    p.source = source;
    if (j.contains("added_tokens")) {
        if (!j["added_tokens"].is_array()) r.fail("added_tokens", "expected a list");
        for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
            const json& a = j["added_tokens"][i];
            const std::string field = "added_tokens[" + std::to_string(i) + "]";
            r.object(a, field);
            if (!a.contains("id") || !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0 ||
                a["id"].get<int64_t>() > (1 << 24))
                r.fail(field + ".id", "expected a token id in [0, 2^24]");
            AddedToken t;
            t.id = a["id"].get<int>();
            t.content = r.string(a, "content", field);
            if (t.content.empty()) r.fail(field + ".content", "empty");
            t.special = r.boolean(a, "special", false);
            t.normalized = r.boolean(a, "normalized", false);
            t.lstrip = r.boolean(a, "lstrip", false);
            t.rstrip = r.boolean(a, "rstrip", false);
            t.single_word = r.boolean(a, "single_word", false);
            p.added.push_back(t);
        }
    }
    if (!j.contains("model")) r.fail("model", "missing");
    p.model = read_model(r, j["model"], p.added);
    read_normalizer(r, j.value("normalizer", json()), "normalizer", p.normalizer);
    read_pre_tokenizer(r, j.value("pre_tokenizer", json()), "pre_tokenizer", p.pre_tokenizer);
    read_decoder(r, j.value("decoder", json()), "decoder", p.decoder);
    read_post_processor(r, j.value("post_processor", json()), "post_processor", p.special_template);

    // tokenizer_config.json: names of BOS/EOS and the chat template.
    auto id_of = [&](const std::string& name) {
        if (name.empty()) return -1;
        for (const auto& a : p.added)
            if (a.content == name) return a.id;
        return p.model->find(name);
    };
    p.bos_id = id_of(special_token_name(config, "bos_token"));
    p.eos_id = id_of(special_token_name(config, "eos_token"));
    if (p.bos_id < 0 && !p.special_template.prefix.empty()) p.bos_id = p.special_template.prefix.front();
    if (config && config->contains("chat_template")) {
        const json& t = (*config)["chat_template"];
        if (t.is_string()) {
            p.chat_template = t.get<std::string>();
        } else if (t.is_array()) {  // [{"name": "default", "template": ...}, ...]
            for (const json& named : t)
                if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
                    named["template"].is_string())
                    p.chat_template = named["template"].get<std::string>();
        } else if (!t.is_null()) {
            throw Error(source +
                        ": tokenizer_config.json chat_template: expected a string or a list of named templates");
        }
    }
    return std::make_shared<Tokenizer>(std::move(p));
}

}  // namespace akunu
