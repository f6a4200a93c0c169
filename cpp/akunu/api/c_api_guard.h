// How the C API turns exceptions into statuses: every entry point runs its body through
// guarded(), which stores the message in a thread-local string for akunu_last_error().
#pragma once

#include <exception>
#include <string>

#include "akunu/api/akunu.h"

namespace akunu::c_api {

std::string& last_error();  // this thread's message

template <class F>
akunu_status guarded(F&& f) {
    try {
        last_error().clear();
        return f();
    } catch (const std::exception& e) {
        last_error() = e.what();
        return AKUNU_ERROR;
    } catch (...) {
        last_error() = "unknown error";
        return AKUNU_ERROR;
    }
}

inline akunu_status invalid(const char* message) {
    last_error() = message;
    return AKUNU_INVALID_ARGUMENT;
}

// n items were needed for an output of cap: OK, or BUFFER_TOO_SMALL with a message.
inline akunu_status fits(size_t n, size_t cap, const char* what) {
    if (n <= cap) return AKUNU_OK;
    last_error() = std::string(what) + ": the output needs " + std::to_string(n) + " entries, " + std::to_string(cap) +
                   " were given";
    return AKUNU_BUFFER_TOO_SMALL;
}

}  // namespace akunu::c_api
