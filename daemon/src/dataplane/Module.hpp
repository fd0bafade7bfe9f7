// l7fast.ko, as the daemon finds it: loaded or not, its version and ABI, the
// algorithms this kernel gives it, and whether socket programs (SK_MSG,
// SK_SKB) can call its kfuncs here. The daemon never loads the module
// itself (the service's privileged ExecStartPre does); it only looks.
#pragma once

#include <cstdint>
#include <string>

namespace l7fast::dataplane {

struct ModuleInfo {
    bool loaded = false;
    std::string version;        // /sys/module/l7fast/version
    uint32_t abi_version = 0;   // /sys/kernel/l7fast/abi_version
    std::string algorithms;     // /sys/kernel/l7fast/algorithms, e.g. "sha256 hs256 rs256"
    bool socket_kfuncs = false; // an SK_MSG program calling a kfunc passes the verifier
    std::string reason;         // why not loaded / why socket programs cannot call it

    // "loaded 0.1.0 (ABI 1; kfuncs in socket programs: yes; sha256 hs256 ...);
    // <what the data plane uses of it>" or "absent: <reason>; <what the
    // daemon does instead>"
    std::string summary() const;

    // Looks at sysfs and runs the kfunc probe (needs CAP_BPF); never fails.
    static ModuleInfo probe();
};

}  // namespace l7fast::dataplane
