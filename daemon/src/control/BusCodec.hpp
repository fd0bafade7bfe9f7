// How the ControlApi types travel over D-Bus, both ways: l7fastd appends
// them to replies, l7fastctl reads them back. Dictionaries (a{sv}) carry the
// records so either side can grow a key without breaking the other: readers
// skip keys they do not know, and a key with an unexpected type is skipped
// too rather than misread. The keys are documented in docs/l7fastctl.md and
// are the same ones `l7fastctl --json` prints.
//
// Every function returns a negative errno on failure, like sd-bus.
#pragma once

#include <systemd/sd-bus.h>

#include <string>
#include <vector>

#include "control/ControlApi.hpp"
#include "control/Json.hpp"

namespace l7fast::control::codec {

// Reload() -> (b ok, t generation, s error); also the Reloaded signal.
int append_reload(sd_bus_message* m, const ReloadOutcome& r);
int read_reload(sd_bus_message* m, ReloadOutcome* r);

// SetLogLevel(s level) -> (s level, s source); an unknown level is an
// InvalidArgs error, not a reply
int append_log_level(sd_bus_message* m, const LogLevelOutcome& r);
int read_log_level(sd_bus_message* m, LogLevelOutcome* r);
// Drain(s endpoint) / Undrain(s endpoint) -> (b changed, s state); an
// endpoint that is not an address of the running policy is an
// InvalidArgs error carrying DrainOutcome::error.
int append_drain(sd_bus_message* m, const DrainOutcome& r);
int read_drain(sd_bus_message* m, DrainOutcome* r);

// GetStatus() -> a{sv}
int append_status(sd_bus_message* m, const StatusInfo& s);
int read_status(sd_bus_message* m, StatusInfo* s);

// GetStats() -> a{sv}, with "routes" as aa{sv} (each with "responses" and
// "rejected" as a{st}) and "counters" as a{st}
int append_stats(sd_bus_message* m, const StatsSnapshot& s);
int read_stats(sd_bus_message* m, StatsSnapshot* s);

// ListRoutes() -> aa{sv}, in evaluation order
int append_routes(sd_bus_message* m, const std::vector<RouteInfo>& routes);
int read_routes(sd_bus_message* m, std::vector<RouteInfo>* routes);

// CheckPolicy(s) -> (b ok, s errors, aa{sv} placement)
int append_check(sd_bus_message* m, const CheckOutcome& c);
int read_check(sd_bus_message* m, CheckOutcome* c);

// Features property: a{ss}
int append_features(sd_bus_message* m, const std::vector<std::pair<std::string, std::string>>& f);

// "kernel" or "user": where a route runs, as the API spells it.
const char* placement_name(bool kernel);

// The next complete value of m as JSON: dictionaries with basic keys become
// objects, other arrays and structs arrays, variants their content, integers
// numbers, booleans booleans, everything else strings.
int write_json(sd_bus_message* m, JsonWriter& w);

}  // namespace l7fast::control::codec
