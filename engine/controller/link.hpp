// The host-link credit of the response ports (docs/timing-contract.md §8, §15): the C++
// mirror of model/link.py's DeficitCredit, kept as plain integers as the golden model does.
#pragma once

#include <cstdint>
#include <vector>

namespace hbf {

class DeficitCredit {
public:
    DeficitCredit(int64_t byte_cost, int64_t gain, int64_t channels)
        : b(byte_cost), gain(gain), credit(channels, gain), credit_t(channels, 0) {}

    // allows() and, if it does, charge(): x(t) > 0, then x(t+1) = min(γ, x - cost + γ)
    bool launch(int64_t ch, int64_t t, int64_t nbytes);
    // the first cycle in which channel ch may launch again (its credit positive)
    int64_t wait(int64_t ch) const;

    int64_t b, gain;
    std::vector<int64_t> credit, credit_t;
};

}  // namespace hbf
