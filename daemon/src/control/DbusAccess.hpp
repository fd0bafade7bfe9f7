// Who is calling, and may they reload: the daemon side of the access rules
// that systemd/org.l7fast.Manager1.conf states for the bus.
#pragma once

#include <systemd/sd-bus.h>

#include <optional>
#include <string>

#include "control/PolicyFileAccess.hpp"

namespace l7fast::control {

// The sender's uid and groups as the bus daemon reports them
// (GetConnectionCredentials: taken from the socket when the sender
// connected, never read from /proc, which would race with the sender
// exiting) -- the same the bus policy's user= and group= rules use. When
// the bus does not report groups, the user database's groups of that uid
// stand in. Returns a negative errno with *error set when the sender cannot
// be identified.
int query_caller(sd_bus_message* m, CallerIdentity* who, sd_bus_error* error);

// The gid of the group "l7fast", if the group exists.
std::optional<gid_t> admin_group_gid();

// Root, or a member of the group "l7fast".
bool may_reload(const CallerIdentity& who);

// What a refused caller is told: `what` ("Reloading the l7fast policy")
// needs root or the group; use sudo (`l7fastctl command`), or join it.
std::string denied_message(const CallerIdentity& who, const std::string& what, const std::string& command);

}  // namespace l7fast::control
