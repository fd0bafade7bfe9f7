// Who besides root may change the policy l7fastd enforces.
//
// l7fastd runs as root and enforces whatever the files under /etc/l7fast
// say, so a policy file or drop-in directory that another user can write is
// a way around every rule in it. Such files are not refused (a broken
// deployment should not take the node's traffic down) but reported: a
// warning in the log at start and at every reload, in `l7fastctl status`
// and in `l7fastctl check`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace l7fast::policy {

// One sentence per problem, naming the path, what is wrong and the fix:
//  - the policy file or a drop-in (*.toml) writable by others, by a group
//    other than root's, or owned by a user other than root (or the caller);
//  - the policy file's directory writable by others without the sticky bit
//    (anyone could replace the file);
//  - the drop-in directory writable by others or by a group other than
//    root's, even with the sticky bit (anyone could add a drop-in).
// Missing paths are not problems here (the loader reports those).
std::vector<std::string> policy_permission_problems(const std::filesystem::path& file,
                                                    const std::filesystem::path& dropin_dir);

}  // namespace l7fast::policy
