// Python view of Tokenizer.
#include "akunu/core/error.h"
#include "akunu/formats/model_files.h"
#include "akunu/tokenizer/tokenizer.h"
#include "bindings.h"

namespace akunu::py_bindings {

void init_tokenizer(py::module_& m) {
    m.def(
        "read_side_file",
        [](const std::string& path) {
            std::string text;
            {
                py::gil_scoped_release release;
                text = read_side_file(path);
            }
            return py::bytes(text);
        },
        py::arg("path"),
        "The bytes of a JSON side file: regular files only, at most kMaxJsonFileBytes (see json_file.h).");
    py::class_<Tokenizer, std::shared_ptr<Tokenizer>>(m, "Tokenizer")
        .def_static(
            "from_json",
            [](const std::string& tokenizer_json, std::optional<std::string> config_json, const std::string& source) {
                const nlohmann::json t = parse_json(tokenizer_json, source);
                std::optional<nlohmann::json> c;
                if (config_json) c = parse_json(*config_json, source + " (tokenizer_config.json)");
                return Tokenizer::from_json(t, c ? &*c : nullptr, source);
            },
            py::arg("tokenizer_json"), py::arg("config_json") = py::none(), py::arg("source") = "tokenizer.json")
        .def_static(
            "from_gguf",
            [](const ModelFiles& files) {
                AKUNU_CHECK(files.gguf(), files.path() + " is not a GGUF file");
                return Tokenizer::from_gguf(*files.gguf());
            },
            py::arg("files"))
        .def_static(
            "from_model_files", [](const ModelFiles& files) { return Tokenizer::from_model(files); }, py::arg("files"),
            "A model's own tokenizer: GGUF metadata, whisper.cpp GGML's tokens, or the tokenizer.json beside it.")
        .def("encode", &Tokenizer::encode, py::arg("text"), py::arg("add_special_tokens") = true,
             py::arg("parse_special") = true, py::call_guard<py::gil_scoped_release>())
        .def("decode", &Tokenizer::decode, py::arg("ids"), py::arg("skip_special_tokens") = false,
             py::call_guard<py::gil_scoped_release>())
        .def(
            "encode_batch",
            [](const Tokenizer& t, const std::vector<std::string>& texts, bool add_special, bool parse_special) {
                std::vector<std::vector<int>> out(texts.size());
                py::gil_scoped_release release;
                for (size_t i = 0; i < texts.size(); ++i) out[i] = t.encode(texts[i], add_special, parse_special);
                return out;
            },
            py::arg("texts"), py::arg("add_special_tokens") = true, py::arg("parse_special") = true)
        .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
        .def("id_to_token",
             [](const Tokenizer& t, int id) { return py::bytes(t.id_to_token(id)).attr("decode")("utf-8", "replace"); })
        .def("token_to_id",
             [](const Tokenizer& t, const std::string& s) -> py::object {
                 const int id = t.token_to_id(s);
                 return id < 0 ? py::none() : py::object(py::int_(id));
             })
        .def("is_special", &Tokenizer::is_special)
        .def_property_readonly("bos_id", &Tokenizer::bos_id)
        .def_property_readonly("eos_id", &Tokenizer::eos_id)
        .def_property_readonly("stop_ids", &Tokenizer::stop_ids)
        .def_property_readonly("chat_template", &Tokenizer::chat_template)
        .def_property_readonly("source", &Tokenizer::source)
        .def_property_readonly("added_tokens", [](const Tokenizer& t) {
            py::list out;
            for (const auto& a : t.added_tokens()) {
                py::dict d;
                d["id"] = a.id;
                d["content"] = a.content;
                d["special"] = a.special;
                out.append(d);
            }
            return out;
        });
}

}  // namespace akunu::py_bindings
