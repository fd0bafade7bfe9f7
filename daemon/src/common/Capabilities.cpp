#include "common/Capabilities.hpp"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace l7fast::caps {
namespace {

struct Sets {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
};

bool get(Sets& s) { return ::syscall(SYS_capget, &s.hdr, s.data) == 0; }

bool has(const __u32 (&words)[2], int cap) { return (words[cap / 32] >> (cap % 32)) & 1u; }

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Capabilities are per thread: a drop in one leaves the others as they were.
int threads()
{
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("Threads:", 0) == 0)
            return std::atoi(line.c_str() + 8);
    return 0;
}

}  // namespace

bool effective(int cap)
{
    Sets s;
    return get(s) && (s.data[cap / 32].effective >> (cap % 32)) & 1u;
}

bool in_bounding_set(int cap) { return ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1; }

Dropped drop_start_only()
{
    Dropped r;
    Sets s;
    if (!get(s)) {
        r.error = errno_text("capget");
        return r;
    }
    const __u32 permitted[2] = {s.data[0].permitted, s.data[1].permitted};
    r.had_sys_admin = has(permitted, CAP_SYS_ADMIN);
    if (int n = threads(); n > 1) {
        r.error = std::to_string(n) + " threads: the other threads would keep CAP_SYS_ADMIN";
        return r;
    }
    // the bounding set first, while CAP_SETPCAP is still effective
    if (in_bounding_set(CAP_SYS_ADMIN) && ::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0 &&
        errno != EPERM) {
        r.error = errno_text("PR_CAPBSET_DROP CAP_SYS_ADMIN");
        return r;
    }
    if (in_bounding_set(CAP_SETPCAP) && !in_bounding_set(CAP_SYS_ADMIN))
        (void)::prctl(PR_CAPBSET_DROP, CAP_SETPCAP, 0, 0, 0);
    r.bounding = !in_bounding_set(CAP_SYS_ADMIN);
    for (int cap : {CAP_SYS_ADMIN, CAP_SETPCAP})
        (void)::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0);
    for (int cap : {CAP_SYS_ADMIN, CAP_SETPCAP}) {
        const __u32 bit = 1u << (cap % 32);
        s.data[cap / 32].effective &= ~bit;
        s.data[cap / 32].permitted &= ~bit;
        s.data[cap / 32].inheritable &= ~bit;
    }
    s.hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    if (::syscall(SYS_capset, &s.hdr, s.data) != 0)
        r.error = errno_text("capset");
    return r;
}

}  // namespace l7fast::caps
