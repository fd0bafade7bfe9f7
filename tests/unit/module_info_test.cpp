// What l7fastctl status says about l7fast.ko (dataplane/Module): whether
// socket programs may call its kfuncs, and what the data plane makes of it.
#include <gtest/gtest.h>

#include "dataplane/Module.hpp"

using l7fast::dataplane::ModuleInfo;

TEST(ModuleInfo, ALoadedModuleSaysWhatTheDataPlaneUsesOfIt)
{
    ModuleInfo m;
    m.loaded = true;
    m.version = "0.1.0";
    m.abi_version = 1;
    m.algorithms = "sha256 hs256";
    m.socket_kfuncs = true;
    EXPECT_EQ(m.summary(),
              "loaded 0.1.0 (ABI 1; kfuncs in socket programs: yes; sha256 hs256); the data plane verifies "
              "HS256/384/512 JWTs with its kfuncs; hashing stays in pure BPF (faster for short keys)");
    m.socket_kfuncs = false;
    m.reason = "SK_MSG probe failed to load (Invalid argument)";
    EXPECT_EQ(m.summary(),
              "loaded 0.1.0 (ABI 1; kfuncs in socket programs: no, SK_MSG probe failed to load (Invalid argument); "
              "sha256 hs256); JWT signatures are checked in user space (the kernel admits tokens l7fastd verified, "
              "from its cache) and hashing runs in pure BPF");
}

TEST(ModuleInfo, AnAbsentModuleSaysWhyAndWhatRunsInstead)
{
    ModuleInfo m;
    m.reason = "not loaded (modprobe l7fast; package l7fast-dkms)";
    EXPECT_EQ(m.summary(), "absent: not loaded (modprobe l7fast; package l7fast-dkms); JWT signatures are checked "
                           "in user space (the kernel admits tokens l7fastd verified, from its cache) and hashing runs "
                           "in pure BPF");
}
