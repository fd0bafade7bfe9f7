#include "dataplane/Features.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace l7fast::dataplane {
namespace {

bool fs_magic_is(const std::string& path, long magic)
{
    struct statfs st {};
    return ::statfs(path.c_str(), &st) == 0 && static_cast<long>(st.f_type) == magic;
}

bool map_type_ok(bpf_map_type t) { return libbpf_probe_bpf_map_type(t, nullptr) == 1; }

const char* yes(bool b) { return b ? "yes" : "no"; }

}  // namespace

Features Features::probe(const std::string& cgroup_path, const std::string& bpffs_path)
{
    Features f;
    struct utsname u {};
    if (::uname(&u) == 0) {
        f.kernel_release = u.release;
        std::sscanf(u.release, "%d.%d", &f.kernel_major, &f.kernel_minor);
    }
    f.btf = std::filesystem::exists("/sys/kernel/btf/vmlinux");

    // A real map creation tells apart "no BPF" from "not allowed" (EPERM).
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "l7_probe", 4, 4, 1, nullptr);
    int create_errno = fd < 0 ? errno : 0;
    if (fd >= 0) {
        f.bpf_syscall = true;
        ::close(fd);
    }
    if (f.bpf_syscall) {
        f.sockhash = map_type_ok(BPF_MAP_TYPE_SOCKHASH);
        f.ringbuf = map_type_ok(BPF_MAP_TYPE_RINGBUF);
        f.sk_msg = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SK_MSG, nullptr) == 1;
        f.sk_skb = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SK_SKB, nullptr) == 1;
        f.bpf_loop = libbpf_probe_bpf_helper(BPF_PROG_TYPE_SK_MSG, BPF_FUNC_loop, nullptr) == 1;
        f.module = ModuleInfo::probe();
    } else {
        f.module.reason = "not probed (no BPF)";
    }
    f.cgroup_path = cgroup_path;
    f.cgroup2 = fs_magic_is(cgroup_path, CGROUP2_SUPER_MAGIC);
    std::string bpffs_root = std::filesystem::path(bpffs_path).parent_path().string();
    f.bpffs = fs_magic_is(bpffs_root.empty() ? "/sys/fs/bpf" : bpffs_root, BPF_FS_MAGIC);

    if (!f.bpf_syscall)
        f.unusable_reason = std::string("cannot create BPF maps (") + std::strerror(create_errno) +
                            "): l7fastd needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON";
    else if (!f.btf)
        f.unusable_reason = "the kernel has no BTF (/sys/kernel/btf/vmlinux): CONFIG_DEBUG_INFO_BTF=y is required";
    else if (!f.sockhash || !f.sk_msg || !f.sk_skb)
        f.unusable_reason = "the kernel lacks sockmap support (CONFIG_BPF_STREAM_PARSER, SK_MSG, SK_SKB)";
    else if (!f.bpf_loop || !f.ringbuf)
        f.unusable_reason = "the kernel is too old for the data plane (needs bpf_loop and ring buffers, 5.17+)";
    else if (cgroup_path.empty())
        f.unusable_reason = "no cgroup v2 hierarchy is mounted: mount -t cgroup2 none /sys/fs/cgroup, "
                            "or set daemon.cgroup in the policy";
    else if (!f.cgroup2)
        f.unusable_reason = "'" + cgroup_path + "' is not a cgroup v2 directory: set daemon.cgroup in the policy";
    else if (!f.bpffs)
        f.unusable_reason = "no BPF filesystem at " + bpffs_root + ": mount -t bpf bpf " + bpffs_root;
    return f;
}

std::string Features::cgroup2_mount()
{
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // "... mount-point ... - fstype source options"
        std::istringstream f(line);
        std::vector<std::string> w;
        for (std::string t; f >> t;)
            w.push_back(t);
        for (size_t i = 0; i + 1 < w.size(); i++)
            if (w[i] == "-" && w[i + 1] == "cgroup2" && w.size() > 4)
                return w[4];
    }
    return {};
}

std::vector<std::pair<std::string, std::string>> Features::report() const
{
    return {
        {"kernel", kernel_release},
        {"bpf", yes(bpf_syscall)},
        {"btf", yes(btf)},
        {"sockhash", yes(sockhash)},
        {"sk_msg", yes(sk_msg)},
        {"sk_skb", yes(sk_skb)},
        {"bpf_loop", yes(bpf_loop)},
        {"ringbuf", yes(ringbuf)},
        {"cgroup2", cgroup2 ? cgroup_path : std::string("no (") + cgroup_path + ")"},
        {"bpffs", yes(bpffs)},
        {"l7fast.ko", module.summary()},
        {"dataplane", dataplane_usable() ? "usable" : "unusable: " + unusable_reason},
    };
}

}  // namespace l7fast::dataplane
