#include "control/CtlCommandLine.hpp"

#include "policy/Text.hpp"

namespace l7fast::control {

std::optional<CtlOptions> parse_command_line(const std::vector<std::string>& args, std::string* error)
{
    CtlOptions o;
    std::vector<std::string> words;
    bool help = false, version = false, only_words = false;
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& a = args[i];
        if (only_words || a.empty() || a[0] != '-' || a == "-") {
            words.push_back(a);
        } else if (a == "--") {
            only_words = true;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--help" || a == "-h") {
            help = true;
        } else if (a == "--version") {
            version = true;
        } else if (a == "--policy-dir") {
            if (i + 1 >= args.size()) {
                *error = "--policy-dir needs a directory";
                return std::nullopt;
            }
            o.policy_dir = args[++i];
        } else if (a.rfind("--policy-dir=", 0) == 0) {
            o.policy_dir = a.substr(13);
        } else {
            *error = "unknown option " + a;
            return std::nullopt;
        }
    }
    if (help) {
        o.command = CtlCommand::Help;
        return o;
    }
    if (version) {
        o.command = CtlCommand::Version;
        return o;
    }
    if (words.empty()) {
        *error = "no command given";
        return std::nullopt;
    }
    const std::string& cmd = words[0];
    size_t want_args = 0, optional_args = 0;
    if (cmd == "status") {
        o.command = CtlCommand::Status;
    } else if (cmd == "reload") {
        o.command = CtlCommand::Reload;
    } else if (cmd == "stats") {
        o.command = CtlCommand::Stats;
    } else if (cmd == "routes") {
        o.command = CtlCommand::Routes;
    } else if (cmd == "dump") {
        o.command = CtlCommand::Dump;
    } else if (cmd == "check") {
        o.command = CtlCommand::Check;
        want_args = 1;
    } else if (cmd == "log-level") {
        o.command = CtlCommand::LogLevel;
        optional_args = 1;
    } else {
        *error = "unknown command \"" + cmd + "\"";
        if (auto guess = policy::text::closest(cmd, {"status", "reload", "stats", "routes", "dump", "check", "log-level"}))
            *error += " (did you mean \"" + *guess + "\"?)";
        return std::nullopt;
    }
    if (words.size() - 1 < want_args) {
        *error = cmd + " needs a policy file";
        return std::nullopt;
    }
    if (words.size() - 1 > want_args + optional_args) {
        *error = cmd + " takes " + (want_args + optional_args ? "one argument" : "no arguments") + ", got \"" +
                 words[want_args + optional_args + 1] + "\"";
        return std::nullopt;
    }
    if (o.command == CtlCommand::LogLevel && words.size() > 1)
        o.level = words[1];
    if (o.policy_dir && o.command != CtlCommand::Check) {
        *error = "--policy-dir applies to check only";
        return std::nullopt;
    }
    if (o.command == CtlCommand::Check) {
        o.file = words[1];
        if (o.file.empty()) {
            *error = "check needs a policy file, got an empty name";
            return std::nullopt;
        }
    }
    return o;
}

std::string usage_text()
{
    return R"(Usage: l7fastctl [--json] COMMAND

Control and inspect l7fastd, the l7fast HTTP policy daemon, over D-Bus
(org.l7fast.Manager1 on the system bus).

Commands:
  status              version, state, policy generation, kernel features,
                      share of routes and requests served in the kernel
  reload              load the policy again and apply it; on an error the
                      running policy stays and the error is printed
                      (needs root or the group "l7fast")
  stats               per-route requests (kernel/user path), responses by
                      class, bytes, and the data plane's fallback counters
  routes              the routes in evaluation order, where each runs
                      (kernel/user) and why
  dump                the policy in force as l7fastd applied it: every
                      listener, route (match, actions in order, placement),
                      cluster (endpoints and their connections), JWT
                      provider (no secrets) and daemon setting
  check FILE          validate a policy file without the daemon; also shows
                      where each route would run when l7fastd is reachable
  log-level [LEVEL]   show l7fastd's log level, or set it (error, warning,
                      notice, info, debug) until `log-level reset` or a
                      restart, reloads included (needs root or the group
                      "l7fast")

Options:
  --json              print one JSON document (stable keys) instead of text
  --policy-dir DIR    check: the drop-in directory to validate with FILE
                      (default: policy.d next to FILE; "" for none)
  -h, --help          show this help
  --version           show the version

Exit status: 0 success, 1 operation failed, 2 usage error,
3 l7fastd not reachable, 4 permission denied.
)";
}

}  // namespace l7fast::control
