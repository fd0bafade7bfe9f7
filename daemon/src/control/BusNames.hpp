// Names of l7fastd's D-Bus API (docs/l7fastctl.md, "D-Bus interface").
#pragma once

namespace l7fast::control {

inline constexpr const char* kBusName = "org.l7fast.Manager1";
inline constexpr const char* kObjectPath = "/org/l7fast/Manager1";
inline constexpr const char* kInterface = "org.l7fast.Manager1";
// Members of the group may call Reload like root (as the bus policy in
// systemd/org.l7fast.Manager1.conf allows them to).
inline constexpr const char* kAdminGroup = "l7fast";

}  // namespace l7fast::control
