// Who besides root may change the policy l7fastd enforces.
//
// l7fastd runs as root and enforces whatever the files under /etc/l7fast
// say, so a policy file or drop-in directory that another user can write is
// a way around every rule in it. Such files are not refused (a broken
// deployment should not take the node's traffic down) but reported: a
// warning in the log at start and at every reload, in `l7fastctl status`
// and in `l7fastctl check`.
#pragma once

#include "config/Policy.hpp"

#include <filesystem>
#include <string>
#include <string_view>
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

// The shipped default policy guards its "private" route with an HS256
// secret that is public (it is in l7fast's source and packages). Its bytes
// begin with this marker; l7fastd warns, like for unsafe permissions, while
// any provider still trusts a secret that begins with it.
inline constexpr std::string_view kPublicDemoSecretMarker = "l7fast-public-demo-secret";

// One sentence per problem in the policy's content that makes its rules
// worthless but is not an error: a JWT provider whose HS* secret is the
// public demo secret (anyone can mint tokens it accepts).
std::vector<std::string> policy_content_problems(const Policy& policy);

}  // namespace l7fast::policy
