// l7fastctl's command line: what the user asked for, the usage text, and
// the exit statuses (docs/l7fastctl.md, "EXIT STATUS").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace l7fast::control {

enum ExitStatus : int {
    kExitOk = 0,
    kExitFailed = 1,       // the operation failed: policy error, reload rejected, bad argument
    kExitUsage = 2,        // the command line is wrong
    kExitUnreachable = 3,  // no system bus, or no l7fastd on it
    kExitDenied = 4,       // the caller may not do this
};

enum class CtlCommand { Status, Reload, Stats, Routes, Dump, Check, Explain, LogLevel, Drain, Undrain, Help, Version };

struct CtlOptions {
    CtlCommand command = CtlCommand::Help;
    bool json = false;
    std::string file;                       // check FILE
    std::optional<std::string> level;       // log-level [LEVEL]
    std::string endpoint;                   // drain/undrain ENDPOINT
    std::optional<std::string> policy_dir;  // check/explain --policy-dir DIR
    // explain METHOD URL [-H 'Name: value']... [--source IP] [--token JWT]
    // [--listener NAME] [--policy FILE]
    std::string method, url;
    std::vector<std::pair<std::string, std::string>> headers;
    std::optional<std::string> source, token, listener;
    std::optional<std::string> policy_file;  // explain offline on this file
};

// The options, or the usage error (one sentence) in *error.
std::optional<CtlOptions> parse_command_line(const std::vector<std::string>& args, std::string* error);

std::string usage_text();

}  // namespace l7fast::control
