#include "dataplane/Module.hpp"

#include <fstream>

#include "l7fast_probe.h"

namespace l7fast::dataplane {
namespace {

std::string read_line(const std::string& path)
{
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
}

// What the data plane does without the module's kfuncs, which today is
// always: it calls none of them yet.
constexpr const char* kWithoutKfuncs = "hashing runs in pure BPF and JWT signatures are checked in user space";

}  // namespace

std::string ModuleInfo::summary() const
{
    if (!loaded)
        return "absent: " + reason + "; " + kWithoutKfuncs;
    std::string s = "loaded " + (version.empty() ? std::string("(no version)") : version) +
                    " (ABI " + std::to_string(abi_version) + "; kfuncs in socket programs: ";
    s += socket_kfuncs ? "yes" : "no, " + reason;
    if (!algorithms.empty())
        s += "; " + algorithms;
    // what the data plane makes of it: nothing yet, and it says so rather
    // than let "yes" above read as JWTs verified in the kernel
    return s + "); the data plane calls none of its kfuncs yet: " + kWithoutKfuncs;
}

ModuleInfo ModuleInfo::probe()
{
    ModuleInfo m;
    m.version = read_line("/sys/module/l7fast/version");
    std::string abi = read_line("/sys/kernel/l7fast/abi_version");
    m.loaded = !abi.empty();
    if (!m.loaded) {
        m.reason = "not loaded (modprobe l7fast; package l7fast-dkms)";
        return m;
    }
    try {
        m.abi_version = static_cast<uint32_t>(std::stoul(abi));
    } catch (...) {
        m.abi_version = 0;
    }
    m.algorithms = read_line("/sys/kernel/l7fast/algorithms");
    l7fast_probe_result r{};
    m.socket_kfuncs = l7fast_probe_socket_kfuncs(&r) == L7FAST_PROBE_AVAILABLE;
    if (!m.socket_kfuncs)
        m.reason = r.reason;
    return m;
}

}  // namespace l7fast::dataplane
