// JSON side files (config.json, tokenizer.json, tokenizer_config.json, a shard index) and JSON
// text: read with stated limits so that a hostile file costs time and memory linear in its size
// and never crashes the process.
//
// - Only regular files are read: a FIFO, a device or a socket is refused before it is opened
//   for reading (a FIFO would block, /dev/zero would never end), and a symlink loop says so.
// - A side file may hold at most kMaxJsonFileBytes bytes.
// - Arrays and objects may nest at most kMaxJsonDepth deep: the parsers and the tokenizer's
//   readers of nested steps recurse once per level.
// - Errors name the file and the problem, never the file's contents.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace akunu {

constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxJsonFileBytes = size_t(64) << 20;

// The bytes of a regular file of at most `max_bytes` bytes; `what` names its role in errors.
std::string read_side_file(const std::string& path, size_t max_bytes = kMaxJsonFileBytes);

// Parses `text`; every failure (syntax, a number out of range, nesting deeper than
// kMaxJsonDepth) is an akunu::Error that names `source`.
nlohmann::json parse_json(std::string_view text, const std::string& source);

// parse_json(read_side_file(path), path).
nlohmann::json read_json_file(const std::string& path);

}  // namespace akunu
