// l7fast.ko's key table as the daemon fills it (dataplane/ModuleKeys): what it
// does and says where the module is not loaded, which is every machine the
// unit tests run on. The installs themselves need the module: the packaged
// system test checks them in Debian's 6.12 kernel (module-keys*), against the
// module's own count of keys.
#include <gtest/gtest.h>

#include <filesystem>

#include "dataplane/ModuleKeys.hpp"

using l7fast::dataplane::ModuleKey;
using l7fast::dataplane::ModuleKeys;

TEST(ModuleKeys, EpochsUseAlternateHalvesOfTheTable)
{
    EXPECT_EQ(ModuleKeys::id_of(1, 0), ModuleKeys::kPerEpoch);
    EXPECT_EQ(ModuleKeys::id_of(2, 0), 0u);
    EXPECT_EQ(ModuleKeys::id_of(3, 5), ModuleKeys::kPerEpoch + 5);
    EXPECT_EQ(ModuleKeys::id_of(4, ModuleKeys::kPerEpoch - 1), ModuleKeys::kPerEpoch - 1);
    EXPECT_EQ(2 * ModuleKeys::kPerEpoch, static_cast<uint32_t>(L7FAST_MAX_KEYS));
}

TEST(ModuleKeys, WithoutTheModuleNothingIsInstalledAndStatusSaysWhy)
{
    if (std::filesystem::exists("/sys/module/l7fast"))
        GTEST_SKIP() << "l7fast.ko is loaded here: this test would replace a running daemon's keys";
    ModuleKeys k;
    EXPECT_FALSE(k.available());
    std::vector<ModuleKey> keys{{0, "a", L7FAST_ALG_HS256, std::string(32, 's')}};
    EXPECT_FALSE(k.install(keys));
    EXPECT_EQ(k.installed(), 0u);
    EXPECT_EQ(k.summary(), "none: l7fast.ko is not loaded (modprobe l7fast; package l7fast-dkms)");
}
