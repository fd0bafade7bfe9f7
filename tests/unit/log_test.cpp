#include <gtest/gtest.h>

#include "common/Log.hpp"

using l7fast::log::Level;

TEST(Log, ParsesLevels)
{
    Level lv{};
    EXPECT_TRUE(l7fast::log::parse_level("debug", &lv));
    EXPECT_EQ(lv, Level::Debug);
    EXPECT_TRUE(l7fast::log::parse_level("error", &lv));
    EXPECT_EQ(lv, Level::Error);
    EXPECT_FALSE(l7fast::log::parse_level("loud", &lv));
}
