// Bounded reading and parsing of JSON side files; see json_file.h for the limits and why.
#include "akunu/formats/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "akunu/core/error.h"

namespace akunu {

namespace {

std::string open_error(const std::string& path, int err) {
    if (err == ELOOP) return "cannot open '" + path + "': symlink loop (too many levels of symbolic links)";
    return "cannot open '" + path + "': " + std::strerror(err);
}

// The byte offset at which arrays and objects nest deeper than kMaxJsonDepth, or npos. Brackets
// inside strings do not count; the scan is linear and allocates nothing.
size_t too_deep_at(std::string_view text) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth) return i;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return std::string_view::npos;
}

// nlohmann's message without its "[json.exception...]" tag and the bytes it last read: an
// error names the file and the problem, not what the file holds.
std::string without_contents(const std::string& what) {
    std::string s = what;
    if (s.rfind("[json.exception.", 0) == 0 && s.find("] ") != std::string::npos) s = s.substr(s.find("] ") + 2);
    const size_t last_read = s.find("; last read");
    return last_read == std::string::npos ? s : s.substr(0, last_read);
}

}  // namespace

std::string read_side_file(const std::string& path, size_t max_bytes) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw Error(open_error(path, errno));
    if (!S_ISREG(st.st_mode))
        throw Error("'" + path + "' is not a regular file (a FIFO, device, socket or directory is not read)");
    if (size_t(st.st_size) > max_bytes)
        throw Error("'" + path + "' holds " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes >> 20) + " MiB akunu reads from a JSON side file");
    // O_NONBLOCK: should the path be swapped for a FIFO after stat, open does not wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(open_error(path, errno));
    std::string text;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error("'" + path + "' is not a regular file");
    }
    char chunk[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            throw Error("cannot read '" + path + "': " + std::strerror(err));
        }
        if (n == 0) break;
        if (text.size() + size_t(n) > max_bytes) {  // the file grew after stat
            ::close(fd);
            throw Error("'" + path + "' holds more than the " + std::to_string(max_bytes >> 20) +
                        " MiB akunu reads from a JSON side file");
        }
        text.append(chunk, size_t(n));
    }
    ::close(fd);
    return text;
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
    const size_t deep = too_deep_at(text);
    if (deep != std::string_view::npos)
        throw Error(source + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
                    std::to_string(deep));
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(source + ": invalid JSON at byte " + std::to_string(e.byte) + " (" + without_contents(e.what()) +
                    ")");
    } catch (const nlohmann::json::out_of_range&) {  // 1e999
        throw Error(source + ": invalid JSON: a number is out of the range of a double");
    } catch (const nlohmann::json::exception& e) {
        throw Error(source + ": invalid JSON (" + without_contents(e.what()) + ")");
    }
}

nlohmann::json read_json_file(const std::string& path) { return parse_json(read_side_file(path), path); }

}  // namespace akunu
