// What every fuzz target shares. A target is a plain function over bytes so
// that the same code runs under libFuzzer (L7FAST_LIBFUZZER: the fuzz build)
// and in the unit tests, which replay the committed corpus — every crash
// that was found and fixed stays a regression test there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace l7fast::fuzz {

// An invariant the code under test broke. Under libFuzzer it aborts (a
// crash with a reproducer); in the unit tests it throws, so the replay
// reports the file and the broken invariant.
[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line)
{
    const std::string msg = std::string(file) + ":" + std::to_string(line) + ": invariant broken: " + what;
#ifdef L7FAST_LIBFUZZER
    fprintf(stderr, "%s\n", msg.c_str());
    abort();
#else
    throw std::logic_error(msg);
#endif
}

}  // namespace l7fast::fuzz

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond))                                                            \
            ::l7fast::fuzz::invariant_failed(#cond, __FILE__, __LINE__);        \
    } while (0)

// L7FAST_FUZZ_ENTRY(fn): fn is this file's target.
#ifdef L7FAST_LIBFUZZER
#include <cstdio>
#include <cstdlib>
#define L7FAST_FUZZ_ENTRY(fn)                                                   \
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)     \
    {                                                                           \
        return ::l7fast::fuzz::fn(data, size);                                  \
    }
#else
#define L7FAST_FUZZ_ENTRY(fn)
#endif
