// l7fastd gives up CAP_SYS_ADMIN after start-up (common/Capabilities): in a
// child process of the (root) test, the capability is gone from every set,
// and the very call libbpf needs it for (walking the kernel's BTF objects,
// BPF_BTF_GET_NEXT_ID) is refused afterwards while it worked before.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/Capabilities.hpp"

namespace caps = l7fast::caps;

namespace {

// What the child found; 0 when everything held, else the first check that
// did not (its number).
int child_checks()
{
    __u32 id = 0;
    if (bpf_btf_get_next_id(0, &id) != 0)
        return 1;  // the walk must work with CAP_SYS_ADMIN
    caps::Dropped d = caps::drop_start_only();
    if (!d.error.empty())
        return 2;
    if (!d.had_sys_admin || !d.bounding)
        return 3;
    if (caps::effective(CAP_SYS_ADMIN) || caps::in_bounding_set(CAP_SYS_ADMIN))
        return 4;
    if (caps::effective(CAP_SETPCAP) || caps::in_bounding_set(CAP_SETPCAP))
        return 5;
    if (!caps::effective(CAP_BPF) || !caps::effective(CAP_NET_ADMIN) || !caps::effective(CAP_PERFMON))
        return 6;  // what the running daemon needs stays
    id = 0;
    if (bpf_btf_get_next_id(0, &id) == 0 || errno != EPERM)
        return 7;
    // a second call changes nothing and fails nothing
    d = caps::drop_start_only();
    if (!d.error.empty() || d.had_sys_admin || !d.bounding)
        return 8;
    return 0;
}

// The child first loses CAP_SETPCAP (as a unit without it would start):
// CAP_SYS_ADMIN then leaves every set but the bounding one.
int child_checks_without_setpcap()
{
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (syscall(SYS_capget, &hdr, data) != 0)
        return 10;
    data[CAP_TO_INDEX(CAP_SETPCAP)].effective &= ~CAP_TO_MASK(CAP_SETPCAP);
    data[CAP_TO_INDEX(CAP_SETPCAP)].permitted &= ~CAP_TO_MASK(CAP_SETPCAP);
    if (syscall(SYS_capset, &hdr, data) != 0)
        return 11;
    caps::Dropped d = caps::drop_start_only();
    if (!d.error.empty())
        return 12;
    if (!d.had_sys_admin || d.bounding || !caps::in_bounding_set(CAP_SYS_ADMIN))
        return 13;
    if (caps::effective(CAP_SYS_ADMIN))
        return 14;
    return 0;
}

// Runs `checks` in a child process (the drop must not reach the test
// runner) and expects exit code 0; skips without root's capabilities.
void expect_in_child(int (*checks)())
{
    if (geteuid() != 0 || !caps::effective(CAP_SYS_ADMIN) || !caps::in_bounding_set(CAP_SETPCAP))
        GTEST_SKIP() << "needs root with CAP_SYS_ADMIN and CAP_SETPCAP";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
        _exit(checks());
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "check " << WEXITSTATUS(status) << " failed (see the child's checks)";
}

}  // namespace

TEST(Capabilities, SysAdminIsGivenUpForGoodAfterStartUp)
{
    expect_in_child(child_checks);
}

TEST(Capabilities, WithoutSetpcapTheBoundingSetKeepsItAndSaysSo)
{
    expect_in_child(child_checks_without_setpcap);
}
