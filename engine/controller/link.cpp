// The deficit link credit (docs/timing-contract.md §8): model/link.py, function for function.
#include "controller/link.hpp"

#include "mapping.hpp"
#include "mutants.hpp"

namespace hbf {

bool DeficitCredit::launch(int64_t ch, int64_t t, int64_t nbytes) {
    bool late = mutant(CTRL_CREDIT_LATE);
    int64_t x;
    if (late && t < credit_t[ch]) {
        x = gain;                       // mutant: the cycle after a launch sees a full bucket
    } else {
        x = credit[ch] + gain * (t - credit_t[ch]);
        if (x > gain) x = gain;
    }
    if (x <= 0) return false;
    if (late) {                         // mutant: the charge lands in t + 2, not t + 1
        int64_t y = 2 * gain - nbytes * b;
        credit[ch] = y < gain ? y : gain;
        credit_t[ch] = t + 2;
        return true;
    }
    x += gain - nbytes * b;
    credit[ch] = x < gain ? x : gain;
    credit_t[ch] = t + 1;
    return true;
}

int64_t DeficitCredit::wait(int64_t ch) const {
    // credit_t + ceil((1 - credit) / gain), as link.py's -(-(1 - credit) // gain)
    return credit_t[ch] - floordiv(credit[ch] - 1, gain);
}

}  // namespace hbf
