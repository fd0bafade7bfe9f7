#include "dataplane/TestFault.hpp"

#include <bpf/libbpf.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "common/Log.hpp"
#include "dataplane/Abi.hpp"
#include "l7fast.skel.h"

namespace l7fast::dataplane {

namespace {

TestFaults parse(const char* env)
{
    TestFaults f;
    if (!env || !*env)
        return f;
    f.text = env;
    std::istringstream in(f.text);
    std::string word;
    while (std::getline(in, word, ',')) {
        if (word == "verifier-reject") {
            f.verifier_reject = true;
        } else if (word == "memlock") {
            f.memlock = true;
        } else if (word == "bench-raw") {
            f.bench_raw = true;
        } else if (word == "no-park-check") {
            f.no_park_check = true;
        } else if (word.rfind("map-full=", 0) == 0) {
            char* end = nullptr;
            unsigned long n = std::strtoul(word.c_str() + 9, &end, 10);
            if (end && !*end && n >= 1 && n <= L7_CONN_PROBES && (n & (n - 1)) == 0)
                f.conns_max = static_cast<uint32_t>(n);
            else
                log::warning("L7FAST_TEST_FAULT: ", word, ": N must be a power of two up to ",
                             L7_CONN_PROBES);
        } else if (!word.empty()) {
            log::warning("L7FAST_TEST_FAULT: unknown fault \"", word, "\" ignored");
        }
    }
    if (f.any())
        log::warning("test fault injection active (L7FAST_TEST_FAULT=", f.text,
                     "): this daemon is deliberately broken for a test");
    return f;
}

}  // namespace

const TestFaults& test_faults()
{
    static const TestFaults faults = parse(std::getenv("L7FAST_TEST_FAULT"));
    return faults;
}

std::string apply_test_faults(l7fast_bpf* skel)
{
    const TestFaults& f = test_faults();
    if (f.memlock)
        return "creating map l7_conns: " + std::string(std::strerror(EPERM)) +
               " (RLIMIT_MEMLOCK too small for the data plane's maps; simulated by "
               "L7FAST_TEST_FAULT=memlock)";
    // sockops' part of l7_conns shrinks to N entries (all of them within
    // its probes: exactly N local clients fit); Dataplane gives the daemon's
    // part N entries too
    if (f.conns_max)
        skel->rodata->cfg_conns_local_mask = *f.conns_max - 1;
    if (f.bench_raw)
        skel->rodata->cfg_raw = 1;
    // a program type whose context and helpers do not fit the code: the
    // verifier of the running kernel refuses it (EACCES/EINVAL), exactly
    // the path a kernel lacking something the program needs takes
    if (f.verifier_reject)
        bpf_program__set_type(skel->progs.l7_req_msg, BPF_PROG_TYPE_SK_SKB);
    return {};
}

void note_map_update_failure(const char* map, int err, const char* consequence)
{
    static std::map<std::string, std::chrono::steady_clock::time_point> last;
    auto now = std::chrono::steady_clock::now();
    auto [it, fresh] = last.try_emplace(map, now);
    if (!fresh && now - it->second < std::chrono::seconds(10))
        return;
    it->second = now;
    log::warning("data-plane map ", map, ": ",
                 err == E2BIG ? "full" : std::strerror(err), "; ", consequence);
}

}  // namespace l7fast::dataplane
