// The capabilities l7fastd needs only while it starts.
//
// libbpf finds a kernel module's kfuncs (l7fast.ko's, for the socket-kfunc
// probe and the programs that call them) by walking the kernel's BTF objects
// with BPF_BTF_GET_NEXT_ID and opening the module's with
// BPF_BTF_GET_FD_BY_ID, and the kernel allows both only with CAP_SYS_ADMIN.
// The service therefore starts with CAP_SYS_ADMIN (and CAP_SETPCAP, to take
// it out of the bounding set), and the daemon gives both up for good once its
// programs are loaded: nothing after start-up needs them.
#pragma once

#include <string>

namespace l7fast::caps {

struct Dropped {
    bool had_sys_admin = false;  // CAP_SYS_ADMIN was permitted before
    bool bounding = false;       // CAP_SYS_ADMIN is out of the bounding set now
    std::string error;           // empty, or what failed: CAP_SYS_ADMIN is then still
                                 // effective and permitted
};

// Removes CAP_SYS_ADMIN and CAP_SETPCAP from the effective, permitted,
// inheritable and ambient sets and, where CAP_SETPCAP allows it, from the
// bounding set, so that no later execve() gets CAP_SYS_ADMIN back either.
// Idempotent.
Dropped drop_start_only();

// Whether capability `cap` is in this thread's effective set / the bounding
// set (tests, logs).
bool effective(int cap);
bool in_bounding_set(int cap);

}  // namespace l7fast::caps
