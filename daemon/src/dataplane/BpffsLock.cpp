#include "dataplane/BpffsLock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace l7fast::dataplane {
namespace {

// The pid holding a FLOCK on (dev, ino), from /proc/locks lines such as
// "1: FLOCK  ADVISORY  WRITE 1234 00:1f:5678 0 EOF"; 0 when not found.
long flock_holder(dev_t dev, ino_t ino)
{
    std::ifstream in("/proc/locks");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string n, kind, mode, rw, where;
        long pid = 0;
        if (!(f >> n >> kind >> mode >> rw >> pid >> where) || kind != "FLOCK")
            continue;
        unsigned maj = 0, min = 0;
        unsigned long long inode = 0;
        if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &inode) == 3 && inode == ino &&
            maj == major(dev) && min == minor(dev))
            return pid;
    }
    return 0;
}

}  // namespace

BpffsLock BpffsLock::acquire(const std::string& dir)
{
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        throw std::runtime_error("creating " + dir + ": " + ec.message());
    Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid())
        throw std::runtime_error("opening " + dir + ": " + std::strerror(errno));
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK)
            throw std::runtime_error("locking " + dir + ": " + std::strerror(errno));
        struct stat st{};
        long pid = ::fstat(fd.get(), &st) == 0 ? flock_holder(st.st_dev, st.st_ino) : 0;
        throw BpffsInUse("another l7fastd" + (pid > 0 ? " (pid " + std::to_string(pid) + ")" : std::string()) +
                         " uses the data plane pinned under " + dir +
                         ": stop it first (systemctl stop l7fast), or give this one its own "
                         "daemon.bpffs and daemon.cgroup");
    }
    return BpffsLock(std::move(fd));
}

}  // namespace l7fast::dataplane
