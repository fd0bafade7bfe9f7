// What l7fastctl prints: aligned tables for people, JSON for programs. The
// JSON keys are those of the D-Bus dictionaries (BusCodec.hpp); where the
// CLI builds JSON from structs rather than from a reply, it uses the same
// keys (a unit test holds them together).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/ControlApi.hpp"
#include "control/Json.hpp"
#include "loader/PolicyLoader.hpp"

namespace l7fast::control {

// Columns separated by two spaces, no trailing blanks; columns marked
// numeric are right-aligned.
class TextTable {
public:
    explicit TextTable(std::vector<std::string> header, std::vector<bool> numeric = {});
    void add(std::vector<std::string> row);
    std::string str() const;

private:
    std::vector<std::vector<std::string>> rows_;
    std::vector<bool> numeric_;
};

std::string format_bytes(uint64_t n);        // "512 B", "1.5 KiB", "3.2 GiB"
std::string format_duration(uint64_t sec);   // "59s", "3m 04s", "2h 03m 04s", "3d 02h 01m"
std::string format_percent(uint64_t part, uint64_t whole);  // "95.0%", "-" when whole is 0

// stats may be null (then no request share is shown).
// "2026-12-02 10:45:01 UTC": Unix seconds as the operator reads them.
std::string format_utc(uint64_t unix_seconds);

// "debug (set with l7fastctl log-level; ...)": a level and where it comes from.
std::string render_log_level(const std::string& level, const std::string& source);

std::string render_status(const StatusInfo& s, const StatsSnapshot* stats);
std::string render_routes(const std::vector<RouteInfo>& routes);
std::string render_stats(const StatsSnapshot& s);

void route_json(JsonWriter& w, const RouteInfo& r);
std::string reload_json(const ReloadOutcome& r);

// l7fastctl check: the offline result, and where the routes would run as
// l7fastd sees it (null with a note saying why when it could not be asked).
struct CheckReport {
    std::string file;
    const policy::PolicyLoadResult* result = nullptr;
    const CheckOutcome* placement = nullptr;
    std::string placement_note;
    std::vector<std::string> warnings;  // unsafe permissions (config/FileSafety.hpp)
};
std::string check_json(const CheckReport& r);
std::string render_check(const CheckReport& r);  // for stdout; errors go to stderr separately

}  // namespace l7fast::control
