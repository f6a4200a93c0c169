// Profiles of recorded tables (profile.h).
#include "akunu/engine/profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "akunu/core/error.h"
#include "akunu/vulkan/command_list.h"
#include "akunu/vulkan/device.h"

namespace akunu {

// How many untimed replays of `table` a profile runs before its timed one, in the same
// submission: enough to keep the GPU busy for kProfileWarmMs by one run's time. A GPU left idle
// for a moment clocks down within seconds, and a lone step does not bring it back: timed alone,
// a decode step reads far longer than it takes inside decode, and replays first bring it back
// to decode's time (bench/NOTES.md, "Profiles timed at idle clocks, and the fix"). CPUs
// (lavapipe, the CPU backend) replay none; tuning profile_warm_ms sets the time anywhere (0:
// none).
int replays_to_warm(const std::shared_ptr<Device>& device, const DispatchTable& table) {
    constexpr double kProfileWarmMs = 400.0;
    const bool gpu = device->profile().type != DeviceType::kCpu;  // lavapipe and the CPU backend are CPUs
    const int tuned = device->profile().tuning.profile_warm_ms;
    const double warm_ms = tuned >= 0 ? double(tuned) : gpu ? kProfileWarmMs : 0.0;
    if (warm_ms <= 0) return 0;
    CommandList once(device);
    once.begin();
    table.record(once);
    once.end();
    const auto t0 = std::chrono::steady_clock::now();
    once.submit_and_wait();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return int(std::clamp(std::ceil(warm_ms / std::max(ms, 1e-3)), 1.0, 256.0));
}

std::vector<ProfileRow> profile_table(const std::shared_ptr<Device>& device, const DispatchTable& table) {
    AKUNU_CHECK(device->profile().timestamps, "'" + device->profile().name + "' has no GPU timestamps to profile with");
    const int replays = replays_to_warm(device, table);
    CommandList cl(device, uint32_t(table.commands().size() + 1));
    std::vector<int> ts;
    cl.begin();
    for (int i = 0; i < replays; ++i) table.record(cl);
    table.record(cl, &ts);
    cl.end();
    cl.submit_and_wait();
    std::vector<ProfileRow> rows;
    for (size_t i = 0; i < table.commands().size(); ++i)
        rows.push_back({&table.commands()[i], cl.elapsed_ms(ts[i], ts[i + 1])});
    return rows;
}

}  // namespace akunu
