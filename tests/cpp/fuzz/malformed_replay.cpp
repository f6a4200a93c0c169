// Opens every entry of a directory of malformed model inputs (tests/python/support/malformed_cases.py
// writes them) as a user would, expecting akunu::Error from each. Built with AddressSanitizer
// by scripts/fuzz.sh, so an out-of-bounds read is a crash, not a pass.
#include <dirent.h>

#include <cstdio>
#include <string>
#include <vector>

#include "akunu/core/error.h"
#include "exercise.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR* dir = opendir(argv[1]);
    if (!dir) {
        std::fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(dir))
        if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    closedir(dir);
    int failures = 0;
    for (const auto& name : names) {
        try {
            auto files = akunu::ModelFiles::open(std::string(argv[1]) + "/" + name);
            akunu::fuzz::exercise_model(*files);
            std::printf("NOT REJECTED  %s\n", name.c_str());
            ++failures;
        } catch (const akunu::Error& e) {
            std::printf("rejected      %s\n", name.c_str());
        }
    }
    std::printf("%zu inputs, %d not rejected\n", names.size(), failures);
    return failures == 0 && !names.empty() ? 0 : 1;
}
