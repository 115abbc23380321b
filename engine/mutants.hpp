// Deliberately broken variants of the engine, for the differential tests only
// (tests/engine/test_mutants.py): each number flips one rule the golden model states.
// 0, the default, is the engine as specified. Set through hbfsim._engine._set_mutant or the
// environment variable HBFSIM_ENGINE_MUTANT at import (hbfsim/engine.py).
#pragma once

namespace hbf {

extern int g_mutant;

// The mutants, by number (docs/engine.md lists them).
enum Mutant : int {
    NONE = 0,
    MEDIA_TIE_HIGHEST_SUB = 1,   // deliver: ties by highest subarray, not lowest
    MEDIA_READ_PLUS_ONE = 2,     // READ from the array costs tR + 1
    MEDIA_HIT_NO_LRU = 3,        // a buffer hit does not move the page to the MRU end
    MEDIA_PROGRAM_KEEPS_BUF = 4, // PROGRAM leaves the page in the page buffers
    MEDIA_ERASE_FREE = 5,        // reusing a free block costs no tBERS
    MEDIA_GC_MOST_VALID = 6,     // ssd GC picks the block with the most valid pages
    MEDIA_TWO_PER_CHANNEL = 7,   // deliver may return two completions of one channel
    MEDIA_GROUP_FASTEST = 8,     // a multi-plane command is due after its fastest plane
    MEDIA_BACKLOG_STRICT = 9,    // backlog(t) only counts completions due before t
    GPU_RR_STAYS = 10,           // G5: the arbiter pointer stays on the granted partition
    GPU_RELEASE_EARLY = 11,      // G3: a response releases the next access one tick early
    GPU_START_ONE = 12,          // G3: a producer starts with one access, not up to bound
    GPU_NO_PAGE_ROTATION = 13,   // G4: partition = chunk mod partitions (no page rotation)
    GPU_LAUNCH_EARLY = 14,       // G2: the next kernel launches one tick early
    GPU_PORT_PTR_STAYS = 15,     // G5': a port's pointer does not move past its grant
    GPU_LATENCY_FROM_GRANT = 16, // statistics: latency from the grant, not the creation
    // the controller (docs/timing-contract.md), engine/controller/
    CTRL_W_FORWARD_OFF = 17,     // DP1: M does not see the Ms' allocations of tm - 1 (no W forwarding)
    CTRL_VICTIM_TIE_REVERSED = 18,  // DP5: of OPEN entries allocated in one cycle the later is the victim
    CTRL_AGG_WINDOW_PLUS1 = 19,  // DP2a: the aggregation window one tick longer
    CTRL_CREDIT_LATE = 20,       // §8: the credit is charged one tick late
    CTRL_ADMISSION_OLD_RANK = 21,   // §4.1: the rotating rank whenever free < P (the old rule)
    CTRL_RESP_PORTS_REVERSED = 22,  // DP4/DP7: response ports stepped in descending order
    CTRL_RETURN_TC_PLUS1 = 23,   // DP6: an MSHR entry in RETURN from tc + 1, not tc + 2
    CTRL_WRITES_FIRST = 24,      // §4.2.4: writes dispatch before reads in one cycle
    CTRL_C1_HIGHEST = 25,        // DP7: C1 takes the highest-index entry in RETURN
    CTRL_STRICT_IN_W = 26,       // §4.4: a strict error taken while a merge is in W
    // the closed window of serve/characterize.py measure() (window_source.cpp)
    WINDOW_ARRIVAL_LATE = 27,    // the next request arrives in the tick after the response
    WINDOW_CLOSE_EARLY = 28,     // the input closes with the last submission, not a response later
    // the pools per channel (docs/timing-contract.md §4.5), engine/controller/dispatch.cpp
    CTRL_POOL_VICTIM_ANY = 29,   // B3: the victim is the oldest OPEN entry of any pool
    CTRL_POOL_FIRST = 30,        // B2: every read allocates from channel 0's MSHR pool
    N_MUTANTS = 31,
};

inline bool mutant(int m) { return g_mutant == m; }

}  // namespace hbf
