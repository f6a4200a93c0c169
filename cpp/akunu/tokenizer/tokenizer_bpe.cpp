// The BPE merge loop.
#include "akunu/tokenizer/tokenizer_bpe.h"

#include <cstdio>
#include <queue>

#include "akunu/core/error.h"
#include "akunu/tokenizer/unicode.h"

namespace akunu {

BpeModel::BpeModel(std::unordered_map<std::string, int> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   const std::string& source)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
    const std::string& prefix = options_.continuing_subword_prefix;
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [a, b] = merges[rank];
        const int ia = find(a), ib = find(b);
        // Like HF, the merged token drops the second part's continuing-subword prefix.
        const std::string merged =
            a + (prefix.empty() || b.compare(0, prefix.size(), prefix) != 0 ? b : b.substr(prefix.size()));
        const int ir = find(merged);
        if (ia < 0 || ib < 0 || ir < 0)
            throw Error(source + ": merge #" + std::to_string(rank) + " '" + a + " " + b +
                        "' uses a token that is not in the vocabulary");
        merges_.emplace(key(ia, ib), Merge{int(rank), ir});  // the first (lowest) rank wins
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte_ids_[b] = find(name);
    }
}

void BpeModel::tokenize(std::string_view word, std::vector<int>& out) const {
    if (word.empty()) return;
    constexpr size_t kMaxCachedWord = 64, kMaxCacheEntries = 1 << 16;
    if (word.size() <= kMaxCachedWord) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        auto it = cache_.find(std::string(word));
        if (it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    const size_t before = out.size();
    tokenize_uncached(word, out);
    if (word.size() <= kMaxCachedWord) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_.size() >= kMaxCacheEntries) cache_.clear();
        cache_.emplace(std::string(word), std::vector<int>(out.begin() + long(before), out.end()));
    }
}

void BpeModel::tokenize_uncached(std::string_view word, std::vector<int>& out) const {
    if (options_.ignore_merges && options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty()) {
        const int whole = find(word);
        if (whole >= 0) {
            out.push_back(whole);
            return;
        }
    }
    struct Symbol {
        int id;
        int prev;
        int next;
        bool alive;
    };
    std::vector<Symbol> sym;
    sym.reserve(word.size());
    bool last_unk = false;
    for (size_t i = 0; i < word.size();) {
        const size_t n = std::min(utf8_length(uint8_t(word[i])), word.size() - i);
        std::string piece(word.substr(i, n));
        if (i > 0 && !options_.continuing_subword_prefix.empty()) piece = options_.continuing_subword_prefix + piece;
        if (i + n == word.size() && !options_.end_of_word_suffix.empty()) piece += options_.end_of_word_suffix;
        const int id = find(piece);
        auto push = [&](int v) { sym.push_back({v, int(sym.size()) - 1, int(sym.size()) + 1, true}); };
        if (id >= 0) {
            push(id);
            last_unk = false;
        } else if (options_.byte_fallback && [&] {
                       for (size_t k = 0; k < n; ++k)
                           if (byte_ids_[uint8_t(word[i + k])] < 0) return false;
                       return true;
                   }()) {
            for (size_t k = 0; k < n; ++k) push(byte_ids_[uint8_t(word[i + k])]);
            last_unk = false;
        } else if (options_.unk_id >= 0) {
            if (!(options_.fuse_unk && last_unk)) push(options_.unk_id);
            last_unk = true;
        }
        i += n;
    }
    if (sym.empty()) return;
    sym.back().next = -1;

    struct Candidate {
        int rank, pos, result;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto consider = [&](int pos) {
        if (pos < 0 || sym[size_t(pos)].next < 0) return;
        auto it = merges_.find(key(sym[size_t(pos)].id, sym[size_t(sym[size_t(pos)].next)].id));
        if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.result});
    };
    for (int i = 0; i + 1 < int(sym.size()); ++i) consider(i);
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        Symbol& left = sym[size_t(c.pos)];
        if (!left.alive || left.next < 0) continue;
        Symbol& right = sym[size_t(left.next)];
        // Stale entries: the pair changed since it was queued.
        auto it = merges_.find(key(left.id, right.id));
        if (it == merges_.end() || it->second.result != c.result || it->second.rank != c.rank) continue;
        left.id = c.result;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) sym[size_t(right.next)].prev = c.pos;
        consider(left.prev);
        consider(c.pos);
    }
    for (int i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

}  // namespace akunu
