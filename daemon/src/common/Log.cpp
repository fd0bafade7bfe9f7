#include "common/Log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace l7fast::log {
namespace {

std::atomic<Level> g_level{Level::Info};

// True when stderr is the journal stream systemd gave us (sd-daemon(3)).
bool stderr_is_journal()
{
    const char* js = std::getenv("JOURNAL_STREAM");
    if (!js)
        return false;
    struct stat st {};
    if (fstat(STDERR_FILENO, &st) != 0)
        return false;
    unsigned long long dev = 0, ino = 0;
    if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2)
        return false;
    return st.st_dev == dev && st.st_ino == ino;
}

}  // namespace

void set_level(Level level) { g_level.store(level); }
Level level() { return g_level.load(); }

namespace {

constexpr std::pair<std::string_view, Level> kLevelNames[] = {
    {"error", Level::Error}, {"warning", Level::Warning}, {"notice", Level::Notice},
    {"info", Level::Info}, {"debug", Level::Debug}};

}  // namespace

bool parse_level(std::string_view text, Level* out)
{
    for (const auto& [name, lv] : kLevelNames) {
        if (text == name) {
            *out = lv;
            return true;
        }
    }
    return false;
}

std::string_view level_name(Level level)
{
    for (const auto& [name, lv] : kLevelNames)
        if (lv == level)
            return name;
    return "info";
}

void write(Level lv, std::string_view message)
{
    static const bool journal = stderr_is_journal();
    static std::mutex mu;
    std::string line;
    if (journal)
        line = "<" + std::to_string(static_cast<int>(lv)) + ">";
    else
        line = std::string(level_name(lv)) + ": ";
    line.append(message);
    line.push_back('\n');
    std::lock_guard<std::mutex> lock(mu);
    (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace l7fast::log
