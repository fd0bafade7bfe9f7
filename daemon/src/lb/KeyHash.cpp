#include "lb/KeyHash.hpp"

#include "l7_xxhash.h"

namespace l7fast::lb {

uint64_t xxh64(std::string_view bytes, uint64_t seed)
{
    return l7_xxh64(bytes.data(), bytes.size(), seed);
}

uint64_t xxh64(std::span<const uint8_t> bytes, uint64_t seed)
{
    return l7_xxh64(bytes.data(), bytes.size(), seed);
}

}  // namespace l7fast::lb
