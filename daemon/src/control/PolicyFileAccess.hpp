// Which files CheckPolicy may read on a caller's behalf.
//
// l7fastd runs as root and CheckPolicy is open to every local user, so a
// careless implementation is a confused deputy: pointed at /etc/shadow, a
// TOML syntax error would quote the bytes it stumbled on; pointed at a FIFO
// or /proc/kmsg, the daemon's only thread would block. Hence:
//  - only regular files on real file systems (no procfs, sysfs, debugfs...),
//    at most the loader's 16 MiB;
//  - for callers other than root, the path is resolved component by
//    component as the caller (their uid and groups, mode bits and POSIX
//    ACLs), so the daemon reads only what the caller could read themselves
//    and learns nothing about paths the caller could not look up; the file is
//    then read through the descriptor that was checked, so swapping a
//    symlink after the check does not help.
// Capabilities of the caller and LSM rules are not considered: a caller
// without root is treated as having none, which can only refuse more.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/Fd.hpp"

namespace l7fast::control {

struct CallerIdentity {
    uid_t uid = 0;
    std::vector<gid_t> groups;  // primary and supplementary

    bool in_group(gid_t g) const;
};

// An entry of the "system.posix_acl_access" extended attribute.
struct AclEntry {
    uint16_t tag = 0;   // ACL_USER_OBJ 0x01, USER 0x02, GROUP_OBJ 0x04, GROUP 0x08, MASK 0x10, OTHER 0x20
    uint16_t perm = 0;  // 4 read, 2 write, 1 execute/search
    uint32_t id = 0;
};

// The entries of an xattr-format ACL (version 2); nullopt when malformed.
std::optional<std::vector<AclEntry>> parse_posix_acl(std::string_view blob);

// Whether discretionary access control grants `who` the `want` bits
// (4 read, 1 search) on an inode: the owner, group and other classes of the
// mode, or the ACL when there is one, as the kernel's generic_permission()
// evaluates them for a process without capabilities.
bool dac_permits(const struct stat& st, const std::vector<AclEntry>* acl, const CallerIdentity& who,
                 unsigned want);

// Empty when path is acceptable as CheckPolicy's argument, else the sentence
// saying why not (empty, relative, too long).
std::string policy_path_problem(std::string_view path);

struct PolicyFile {
    Fd fd;              // O_PATH descriptor of the checked regular file
    uint64_t size = 0;
    std::string error;  // a sentence naming the path; empty on success
};

// Resolves path (absolute) and checks it as described above. who == nullptr
// means the caller is root: no permission checks, the rest still applies.
PolicyFile open_policy_file(const std::string& path, const CallerIdentity* who, uint64_t max_bytes);

}  // namespace l7fast::control
