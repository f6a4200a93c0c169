// LayerRange: the layers [first, last) one part of a model holds when the model is split by
// layers across devices (split.h). The whole model is {0, n_layers}: it embeds the tokens (its
// range starts at layer 0) and ends in the head and sampler (its range ends at n_layers).
#pragma once

namespace akunu {

struct LayerRange {
    int first = 0;
    int last = -1;  // one past the part's last layer; -1: the model's last layer
    int end(int n_layers) const { return last < 0 ? n_layers : last; }
    bool whole(int n_layers) const { return first == 0 && end(n_layers) == n_layers; }
    bool holds(int layer, int n_layers) const { return layer >= first && layer < end(n_layers); }
    bool embeds() const { return first == 0; }
    bool heads(int n_layers) const { return end(n_layers) == n_layers; }
};

}  // namespace akunu
