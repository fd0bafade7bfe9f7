// Levelled logging to stderr. Under systemd, stderr is the journal: lines
// carry sd-daemon "<N>" priority prefixes so journalctl shows real levels;
// on a terminal they carry the level name instead.
#pragma once

#include <sstream>
#include <string_view>

namespace l7fast::log {

enum class Level { Error = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

void set_level(Level level);
Level level();
// Parses "error", "warning", "notice", "info", "debug".
bool parse_level(std::string_view text, Level* out);
// The name parse_level takes for level.
std::string_view level_name(Level level);
void write(Level level, std::string_view message);

template <class... Args>
void emit(Level lv, const Args&... args)
{
    if (static_cast<int>(lv) > static_cast<int>(level()))
        return;
    std::ostringstream os;
    (os << ... << args);
    write(lv, os.str());
}

template <class... A> void error(const A&... a) { emit(Level::Error, a...); }
template <class... A> void warning(const A&... a) { emit(Level::Warning, a...); }
template <class... A> void notice(const A&... a) { emit(Level::Notice, a...); }
template <class... A> void info(const A&... a) { emit(Level::Info, a...); }
template <class... A> void debug(const A&... a) { emit(Level::Debug, a...); }

}  // namespace l7fast::log
