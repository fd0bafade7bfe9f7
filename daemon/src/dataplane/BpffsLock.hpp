// One l7fastd per pin directory. The directory under bpffs holds what a
// restart needs to keep connections (the maps, the sockops link); a second
// daemon on the same directory would replace those pins and remove them all
// when it stops, while the first one goes on serving without them. So the
// daemon holds an exclusive flock on the directory for its whole life and a
// second one refuses to start.
#pragma once

#include <stdexcept>
#include <string>

#include "common/Fd.hpp"

namespace l7fast::dataplane {

class BpffsInUse : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class BpffsLock {
public:
    BpffsLock() = default;
    // Creates `dir` if needed and locks it. Throws BpffsInUse (naming the
    // holder's pid when /proc/locks tells) when another process holds it,
    // std::runtime_error when the directory cannot be made or opened.
    static BpffsLock acquire(const std::string& dir);
    bool held() const { return fd_.valid(); }

private:
    explicit BpffsLock(Fd fd) : fd_(std::move(fd)) {}
    Fd fd_;  // the lock lives as long as the descriptor
};

}  // namespace l7fast::dataplane
