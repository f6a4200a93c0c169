// Python view of a batch (engine/batch.h): sequences, steps, and copies of each sequence's KV
// rows, logits and block table. akunu.Batch (python/akunu/batch.py) is the public API.
#include <cstring>

#include "akunu/core/error.h"
#include "akunu/engine/batch.h"
#include "akunu/engine/model.h"
#include "bindings.h"

namespace akunu::py_bindings {

namespace {

// A batch keeps its model alive: its tables bind the model's weights.
struct PyBatch {
    std::shared_ptr<Model> model;
    std::unique_ptr<Batch> batch;
};

SamplerState sampler_state(float temperature, uint32_t top_k, float top_p, float min_p, uint64_t seed) {
    return SamplerState{temperature, top_k, top_p, min_p, uint32_t(seed), uint32_t(seed >> 32), 0, 0};
}

// One side of one layer of a sequence's cache: f16 [n_kv, length, head_dim], packed u32 codes
// [n_kv, length, words], or with `scales` the f16 row scales [n_kv, length].
py::array kv_rows(const KvPool& pool, int seq, int layer, bool values, bool scales) {
    AKUNU_CHECK(layer >= 0 && layer < pool.n_layers(), "layer " + std::to_string(layer) + " is out of range (0 to " +
                                                           std::to_string(pool.n_layers() - 1) + ")");
    const std::vector<uint8_t> bytes = pool.read_side(seq, layer, values, scales);
    const size_t heads = size_t(pool.n_kv_heads()), n = size_t(pool.length(seq));
    const KvDType side = kv_side(pool.dtype(), values);
    py::array a;
    if (scales || side == KvDType::kF16)
        a = py::array(py::dtype("float16"),
                      scales ? std::vector<size_t>{heads, n} : std::vector<size_t>{heads, n, size_t(pool.head_dim())});
    else
        a = py::array_t<uint32_t>({heads, n, size_t(pool.head_dim()) * size_t(kv_value_bits(side)) / 32});
    std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
    return a;
}

}  // namespace

void init_batch(py::module_& m) {
    m.attr("KV_BLOCK") = AKUNU_KV_BLOCK;  // positions a KV pool block holds
    py::class_<PyBatch>(m, "BatchEngine")
        .def(py::init(
                 [](const std::shared_ptr<Model>& model, int max_sequences, int rows, int blocks, bool prefix_sharing) {
                     BatchOptions o{max_sequences, rows, blocks, prefix_sharing};
                     py::gil_scoped_release release;
                     return std::make_unique<PyBatch>(PyBatch{model, std::make_unique<Batch>(*model, o)});
                 }),
             py::arg("model"), py::arg("max_sequences") = 8, py::arg("rows") = 0, py::arg("blocks") = 0,
             py::arg("prefix_sharing") = true)
        .def_static(
            "scoring_rows", [](const std::shared_ptr<Model>& model) { return scoring_rows(*model); }, py::arg("model"),
            "The rows score_batch's steps take by default (0: a Batch's default): twice the prefill chunk on GPUs.")
        .def(
            "add",
            [](PyBatch& b, const std::vector<int>& ids, float temperature, uint32_t top_k, float top_p, float min_p,
               uint64_t seed,
               bool score) { return b.batch->add(ids, sampler_state(temperature, top_k, top_p, min_p, seed), score); },
            py::arg("ids"), py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
            py::arg("min_p") = 0.0f, py::arg("seed") = 0, py::arg("score") = false)
        .def(
            "fork",
            [](PyBatch& b, int seq, float temperature, uint32_t top_k, float top_p, float min_p, uint64_t seed) {
                return b.batch->fork(seq, sampler_state(temperature, top_k, top_p, min_p, seed));
            },
            py::arg("seq"), py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
            py::arg("min_p") = 0.0f, py::arg("seed") = 0)
        .def("remove", [](PyBatch& b, int seq) { b.batch->remove(seq); })
        .def(
            "add_empty",
            [](PyBatch& b, float temperature, uint32_t top_k, float top_p, float min_p, uint64_t seed) {
                return b.batch->add_empty(sampler_state(temperature, top_k, top_p, min_p, seed));
            },
            py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f,
            py::arg("seed") = 0)
        .def("extend", [](PyBatch& b, int seq, const std::vector<int>& ids) { b.batch->extend(seq, ids); })
        .def("set_pending", [](PyBatch& b, int seq, const std::vector<int>& ids,
                               bool score) { b.batch->set_pending(seq, ids, score); })
        .def("kv_write",
             [](PyBatch& b, int seq, int layer, bool values, int from,
                py::array_t<uint16_t, py::array::c_style | py::array::forcecast> rows) {
                 // rows: the f16 bits [n_kv, n, head_dim]
                 const KvPool& p = b.batch->pool();
                 AKUNU_CHECK(rows.ndim() == 3 && rows.shape(0) == p.n_kv_heads() && rows.shape(2) == p.head_dim(),
                             "KV rows: expected [" + std::to_string(p.n_kv_heads()) + ", n, " +
                                 std::to_string(p.head_dim()) + "] f16");
                 b.batch->write_kv(seq, layer, values, from, int(rows.shape(1)), rows.data());
             })
        .def("advance", [](PyBatch& b, int seq, int n) { b.batch->advance(seq, n); })
        .def("score_greedy",
             [](const PyBatch& b, int seq) {
                 const std::vector<uint8_t>& g = b.batch->score_greedy(seq);
                 return std::vector<bool>(g.begin(), g.end());
             })
        .def(
            "step",
            [](PyBatch& b, bool wait) {
                std::vector<BatchToken> out;
                {
                    py::gil_scoped_release release;
                    out = b.batch->step(wait);
                }
                py::list rows;
                for (const BatchToken& t : out) rows.append(py::make_tuple(t.seq, t.token, t.logprob));
                return rows;
            },
            py::arg("wait") = false)
        .def("active", [](const PyBatch& b, int seq) { return b.batch->active(seq); })
        .def("length", [](const PyBatch& b, int seq) { return b.batch->length(seq); })
        .def("pending", [](const PyBatch& b, int seq) { return b.batch->pending(seq); })
        .def("scores", [](const PyBatch& b, int seq) { return b.batch->scores(seq); })
        .def("logits",
             [](const PyBatch& b, int seq) {
                 const std::vector<float> l = b.batch->logits(seq);
                 py::array_t<float> a(l.size());
                 std::memcpy(a.mutable_data(), l.data(), l.size() * 4);
                 return a;
             })
        .def("block_table", [](const PyBatch& b, int seq) { return b.batch->block_table(seq); })
        .def(
            "kv_view",
            [](const PyBatch& b, int seq, int layer, bool values, bool scales) {
                b.batch->length(seq);  // throws for a sequence not in the batch
                return kv_rows(b.batch->pool(), seq, layer, values, scales);
            },
            py::arg("seq"), py::arg("layer"), py::arg("values"), py::arg("scales") = false)
        .def_property_readonly("max_sequences", [](const PyBatch& b) { return b.batch->max_sequences(); })
        .def_property_readonly("rows", [](const PyBatch& b) { return b.batch->rows(); })
        .def_property_readonly("kv_dtype", [](const PyBatch& b) { return kv_dtype_name(b.batch->pool().dtype()); })
        .def_property_readonly("n_layers", [](const PyBatch& b) { return b.batch->pool().n_layers(); })
        .def_property_readonly("context", [](const PyBatch& b) { return b.batch->pool().context(); })
        .def_property_readonly("n_kv_heads", [](const PyBatch& b) { return b.batch->pool().n_kv_heads(); })
        .def_property_readonly("head_dim", [](const PyBatch& b) { return b.batch->pool().head_dim(); })
        .def("dispatch_table", [](const PyBatch& b) { return dispatch_rows(b.batch->table()); })
        .def("profile",
             [](const PyBatch& b) {
                 std::vector<ProfileRow> rows;
                 {
                     py::gil_scoped_release release;
                     rows = b.batch->profile();
                 }
                 return profile_rows(rows);
             })
        .def("memory_report", [](const PyBatch& b) {
            const KvPool& p = b.batch->pool();
            py::dict d;
            d["blocks"] = p.blocks_total();
            d["blocks_free"] = p.blocks_free();
            d["blocks_used"] = p.blocks_total() - p.blocks_free();
            d["blocks_shared"] = p.blocks_shared();
            d["block_bytes"] = p.block_bytes();
            d["kv_bytes"] = p.bytes();  // with the recent window's
            d["recent_bytes"] = p.recent_bytes();
            d["scratch_bytes"] = b.batch->scratch_bytes();
            d["microbatches"] = b.batch->microbatches();
            return d;
        });
}

}  // namespace akunu::py_bindings
