// systemd's file descriptor store (sd_notify FDSTORE=1): the daemon keeps a
// copy of every socket that carries a connection in the service manager,
// so that a restarted l7fastd (crash, upgrade, `systemctl restart`) gets
// them back and established connections survive. Enabled when the unit
// sets L7FAST_FDSTORE=1 (with FileDescriptorStoreMax=) and NOTIFY_SOCKET is
// there; a no-op otherwise.
#pragma once

#include <string>
#include <vector>

#include "common/Fd.hpp"

namespace l7fast {

class FdStore {
public:
    static FdStore& get();

    bool enabled() const { return enabled_; }
    // Stores a duplicate of `fd` under `name` (unique per stored socket).
    void add(int fd, const std::string& name);
    // Drops what is stored under `name` (the socket is being closed).
    void remove(const std::string& name);
    // From now on nothing is removed: the process exits and hands its
    // sockets over to the next instance.
    void freeze() { frozen_ = true; }

    struct Inherited {
        Fd fd;
        std::string name;
    };
    // The descriptors passed at start (LISTEN_FDS / LISTEN_FDNAMES), once,
    // owned: one nobody takes is closed with its Inherited.
    static std::vector<Inherited> take_inherited();

private:
    FdStore();
    bool enabled_ = false;
    bool frozen_ = false;
};

}  // namespace l7fast
