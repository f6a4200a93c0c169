// The thread scenarios of tests/python/test_threads.py, from C++, for ThreadSanitizer.
//
// clang's shared TSan runtime cannot be preloaded into a Python process on every system (where
// it cannot, even /bin/true crashes under it), so scripts/sanitize.sh runs the same scenarios
// from this executable, which links the TSan runtime statically:
//   1. a Model and its fork, each on its own thread;
//   2. two Models of one file, each on its own thread;
//   3. one Model from two threads: every call either runs or fails at once with the
//      "in use by another thread" error, and a run alone afterwards is still exact.
// Each thread's greedy tokens must equal a single-threaded run's. Exit status 0 when every
// scenario held; TSan's own reports fail the run through halt_on_error.
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/engine/model.h"

namespace {

using akunu::Model;

std::vector<int> greedy(Model& m, const std::vector<int>& prompt, int n) {
    m.reset();
    m.eval(prompt);
    std::vector<int> out = {m.sampled_token()};
    while (int(out.size()) < n) {
        const std::vector<int> chain = m.decode_chain(out.back());  // feeds it, samples chain() more
        out.insert(out.end(), chain.begin(), chain.end());
    }
    out.resize(size_t(n));
    return out;
}

int failures = 0;

void expect(bool ok, const char* what) {
    if (!ok) ++failures, std::fprintf(stderr, "FAILED: %s\n", what);
}

void in_parallel(Model& a, Model& b, const std::vector<int>& prompt, const std::vector<int>& want, const char* what) {
    std::vector<int> got_a, got_b;
    std::thread t([&] {
        for (int i = 0; i < 4; ++i) got_a = greedy(a, prompt, 24);
    });
    for (int i = 0; i < 4; ++i) got_b = greedy(b, prompt, 24);
    t.join();
    expect(got_a == want && got_b == want, what);
}

void one_model_two_threads(Model& m, const std::vector<int>& prompt, const std::vector<int>& want) {
    std::atomic<int> refused{0}, other{0};
    auto work = [&] {
        for (int i = 0; i < 20; ++i) {
            try {
                greedy(m, prompt, 8);
            } catch (const akunu::Error& e) {
                const bool in_use = std::string(e.what()).find("in use by another thread") != std::string::npos;
                (in_use ? refused : other)++;
            }
        }
    };
    std::thread t(work);
    work();
    t.join();
    expect(other == 0, "one model from two threads: only the in-use error");
    expect(greedy(m, prompt, 24) == want, "one model from two threads: exact afterwards");
    std::printf("one model, two threads: %d calls refused\n", refused.load());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    akunu::LoadOptions o;
    o.device = "cpu";
    o.context = 128;
    std::unique_ptr<Model> m = Model::load(argv[1], o);
    const std::vector<int> prompt = {1, 5, 9, 13, 17};
    const std::vector<int> want = greedy(*m, prompt, 24);

    std::unique_ptr<Model> fork = m->fork();
    in_parallel(*m, *fork, prompt, want, "a model and its fork on two threads");
    std::unique_ptr<Model> second = Model::load(argv[1], o);
    in_parallel(*m, *second, prompt, want, "two models of one file on two threads");
    one_model_two_threads(*m, prompt, want);
    std::printf(failures ? "thread scenarios: %d failed\n" : "thread scenarios: all held\n", failures);
    return failures ? 1 : 0;
}
