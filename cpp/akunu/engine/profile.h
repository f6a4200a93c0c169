// Profiles of recorded tables: each command's device time (GPU timestamps; on the CPU backend
// the host clock between commands), for Model::profile and WhisperModel::profile.
#pragma once

#include <memory>
#include <vector>

#include "akunu/vulkan/dispatch.h"

namespace akunu {

class Device;

// One command of a profiled table and its device time.
struct ProfileRow {
    const DispatchCmd* cmd;
    double ms;
};

// How many untimed replays of `table` a profile runs before its timed one, in the same
// submission (see profile.cpp).
int replays_to_warm(const std::shared_ptr<Device>& device, const DispatchTable& table);

// Replays `table` once with a timestamp between its commands, after replays_to_warm() untimed
// replays in the same submission. The table's inputs are whatever its buffers hold.
std::vector<ProfileRow> profile_table(const std::shared_ptr<Device>& device, const DispatchTable& table);

}  // namespace akunu
