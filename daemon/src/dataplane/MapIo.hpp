// The data plane's error type and the map operations every writer of its
// maps shares (Dataplane, TableWriter).
#pragma once

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace l7fast::dataplane {

class DataplaneError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

inline std::string errstr(int err) { return std::strerror(err < 0 ? -err : err); }

// Every key of a hash map, read before the caller acts on any (deleting
// while iterating restarts bpf_map_get_next_key from the first key).
template <class Key>
std::vector<Key> map_keys(int fd)
{
    std::vector<Key> keys;
    Key cur{}, next{};
    const void* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        keys.push_back(next);
        cur = next;
        prev = &cur;
    }
    return keys;
}

inline void update_or_throw(int fd, const void* key, const void* val, const char* what)
{
    if (bpf_map_update_elem(fd, key, val, BPF_ANY) != 0)
        throw DataplaneError(std::string("updating ") + what + ": " + errstr(errno));
}

}  // namespace l7fast::dataplane
