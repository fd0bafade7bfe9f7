// What the running kernel offers the data plane, probed at start (never
// inferred from build-host headers). The report is printed at start and
// exported over D-Bus.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dataplane/Module.hpp"

namespace l7fast::dataplane {

struct Features {
    std::string kernel_release;   // uname -r
    int kernel_major = 0, kernel_minor = 0;
    bool bpf_syscall = false;     // can create maps at all (privileges, memlock)
    bool btf = false;             // /sys/kernel/btf/vmlinux
    bool sockhash = false;
    bool ringbuf = false;
    bool bpf_loop = false;        // helper for SK_MSG (5.17+)
    bool sk_msg = false;
    bool sk_skb = false;
    bool cgroup2 = false;         // settings cgroup path is a cgroup v2 directory
    bool bpffs = false;           // /sys/fs/bpf is a BPF filesystem
    std::string cgroup_path;
    ModuleInfo module;            // l7fast.ko (optional)
    std::string unusable_reason;  // empty when the data plane can run

    bool dataplane_usable() const { return unusable_reason.empty(); }
    std::vector<std::pair<std::string, std::string>> report() const;

    static Features probe(const std::string& cgroup_path, const std::string& bpffs_path);
    // Mount point of the cgroup v2 hierarchy (/sys/fs/cgroup on unified
    // systems, /sys/fs/cgroup/unified on hybrid ones), or empty.
    static std::string cgroup2_mount();
};

}  // namespace l7fast::dataplane
