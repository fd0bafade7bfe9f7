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

// What the data plane does without the module's kfuncs in socket programs.
constexpr const char* kWithoutKfuncs =
    "JWT signatures are checked in user space (the kernel admits tokens l7fastd verified, from its cache) and hashing "
    "runs in pure BPF";

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
    if (!socket_kfuncs)
        return s + "); " + kWithoutKfuncs;
    // ring-hash keys: the pure-BPF XXH64 measured faster than the kfunc
    // for the data plane's key lengths (ARCHITECTURE.md §3)
    return s + "); the data plane verifies HS256/384/512 JWTs with its kfuncs; hashing stays in pure BPF (faster "
               "for short keys)";
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
