// Multi-plane (hyperpage) commands of one stack controller: shared command logic per
// megaplane, grouping at the issue decision, the gather window and one completion per
// command (docs/timing-contract.md §7a, MP1-MP9): the C++ mirror of model/megaplane.py.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace hbf {

class StackController;

class Megaplanes {
public:
    explicit Megaplanes(StackController& ctrl);
    bool issue(int64_t t, bool drain);     // MP1, MP3-MP5 (§7)
    bool release(int64_t t);               // MP1, MP7: free megaplanes and active slots
    int64_t next_wake() const { return wake.empty() ? -1 : wake.top().first; }

    int64_t M, S;
    bool gather;
    int64_t window;
    std::vector<std::vector<char>> busy;   // per channel per megaplane (MP1)
    std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>,
                        std::greater<>> wake;   // (tick, channel): an MP4 window runs out
    bool drained = false;
    int64_t commands = 0, grouped = 0;

private:
    StackController& c;
};

}  // namespace hbf
