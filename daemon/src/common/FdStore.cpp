#include "common/FdStore.hpp"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>

#include "common/Log.hpp"

namespace l7fast {

FdStore& FdStore::get()
{
    static FdStore s;
    return s;
}

FdStore::FdStore()
{
    const char* on = std::getenv("L7FAST_FDSTORE");
    enabled_ = on && std::strcmp(on, "1") == 0 && std::getenv("NOTIFY_SOCKET");
}

void FdStore::add(int fd, const std::string& name)
{
    if (!enabled_ || fd < 0)
        return;
    std::string msg = "FDSTORE=1\nFDNAME=" + name;
    int r = sd_pid_notify_with_fds(0, 0, msg.c_str(), &fd, 1);
    if (r <= 0)
        log::warning("cannot store socket ", name, " with the service manager: ",
                     r < 0 ? std::strerror(-r) : "no NOTIFY_SOCKET",
                     " (it will not survive a restart)");
}

void FdStore::remove(const std::string& name)
{
    if (!enabled_ || frozen_)
        return;
    std::string msg = "FDSTOREREMOVE=1\nFDNAME=" + name;
    sd_notify(0, msg.c_str());
}

std::vector<FdStore::Inherited> FdStore::take_inherited()
{
    std::vector<Inherited> out;
    char** names = nullptr;
    int n = sd_listen_fds_with_names(1, &names);
    if (n < 0) {
        log::warning("ignoring the descriptors passed at start: ", std::strerror(-n));
        return out;
    }
    for (int i = 0; i < n; i++) {
        out.push_back({Fd(SD_LISTEN_FDS_START + i), names && names[i] ? names[i] : ""});
        if (names)
            std::free(names[i]);
    }
    std::free(names);
    return out;
}

}  // namespace l7fast
