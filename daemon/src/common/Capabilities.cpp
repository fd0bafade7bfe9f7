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

// Whether `cap` is in one of the sets of `s` (effective, permitted, ...).
bool in(const Sets& s, __u32 __user_cap_data_struct::*set, int cap)
{
    return (s.data[CAP_TO_INDEX(cap)].*set & CAP_TO_MASK(cap)) != 0;
}

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
    return get(s) && in(s, &__user_cap_data_struct::effective, cap);
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
    r.had_sys_admin = in(s, &__user_cap_data_struct::permitted, CAP_SYS_ADMIN);
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
        __user_cap_data_struct& d = s.data[CAP_TO_INDEX(cap)];
        d.effective &= ~CAP_TO_MASK(cap);
        d.permitted &= ~CAP_TO_MASK(cap);
        d.inheritable &= ~CAP_TO_MASK(cap);
    }
    s.hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    if (::syscall(SYS_capset, &s.hdr, s.data) != 0)
        r.error = errno_text("capset");
    return r;
}

}  // namespace l7fast::caps
