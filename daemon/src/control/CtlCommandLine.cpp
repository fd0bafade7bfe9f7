#include "control/CtlCommandLine.hpp"

#include <functional>

#include "config/Text.hpp"

namespace l7fast::control {

std::optional<CtlOptions> parse_command_line(const std::vector<std::string>& args, std::string* error)
{
    CtlOptions o;
    std::vector<std::string> words;
    bool help = false, version = false, only_words = false;
    // options that take a value: "--name VALUE" or "--name=VALUE"
    struct Valued {
        const char* name;
        const char* what;
        std::function<bool(const std::string&)> set;
    };
    const Valued valued[] = {
        {"--policy-dir", "a directory", [&](const std::string& v) { o.policy_dir = v; return true; }},
        {"--source", "an IP address", [&](const std::string& v) { o.source = v; return true; }},
        {"--token", "a JWT", [&](const std::string& v) { o.token = v; return true; }},
        {"--listener", "a listener's name", [&](const std::string& v) { o.listener = v; return true; }},
        {"--policy", "a policy file", [&](const std::string& v) { o.policy_file = v; return true; }},
        {"--header", "'Name: value'",
         [&](const std::string& v) {
             const size_t colon = v.find(':');
             if (colon == std::string::npos || colon == 0)
                 return false;
             std::string value = v.substr(colon + 1);
             const size_t b = value.find_first_not_of(" \t");
             const size_t e = value.find_last_not_of(" \t");
             value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
             o.headers.emplace_back(v.substr(0, colon), value);
             return true;
         }},
    };
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& a = args[i];
        if (only_words || a.empty() || a[0] != '-' || a == "-") {
            words.push_back(a);
            continue;
        }
        if (a == "--") {
            only_words = true;
            continue;
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (a == "--help" || a == "-h") {
            help = true;
            continue;
        }
        if (a == "--version") {
            version = true;
            continue;
        }
        const std::string opt = a == "-H" ? "--header" : a;
        bool known = false;
        for (const Valued& v : valued) {
            const std::string name = v.name;
            std::optional<std::string> value;
            if (opt == name) {
                if (i + 1 >= args.size()) {
                    *error = a + " needs " + v.what;
                    return std::nullopt;
                }
                value = args[++i];
            } else if (opt.rfind(name + "=", 0) == 0) {
                value = opt.substr(name.size() + 1);
            } else {
                continue;
            }
            known = true;
            if (!v.set(*value)) {
                *error = a + " needs " + v.what + ", got \"" + *value + "\"";
                return std::nullopt;
            }
            break;
        }
        if (!known) {
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
    } else if (cmd == "explain") {
        o.command = CtlCommand::Explain;
        want_args = 2;
    } else if (cmd == "log-level") {
        o.command = CtlCommand::LogLevel;
        optional_args = 1;
    } else if (cmd == "drain" || cmd == "undrain") {
        o.command = cmd == "drain" ? CtlCommand::Drain : CtlCommand::Undrain;
        want_args = 1;
    } else {
        *error = "unknown command \"" + cmd + "\"";
        if (auto guess = policy::text::closest(cmd, {"status", "reload", "stats", "routes", "dump", "check", "explain", "log-level", "drain", "undrain"}))
            *error += " (did you mean \"" + *guess + "\"?)";
        return std::nullopt;
    }
    if (words.size() - 1 < want_args) {
        *error = cmd + (o.command == CtlCommand::Explain ? " needs a method and a URL (explain GET /path)"
                        : o.command == CtlCommand::Check ? " needs a policy file"
                                                         : " needs an endpoint address (" + cmd + " 10.0.0.5:8080)");
        return std::nullopt;
    }
    if (words.size() - 1 > want_args + optional_args) {
        *error = cmd + " takes " +
                 (want_args + optional_args == 2 ? "two arguments"
                  : want_args + optional_args  ? "one argument"
                                               : "no arguments") +
                 ", got \"" +
                 words[want_args + optional_args + 1] + "\"";
        return std::nullopt;
    }
    if (o.command == CtlCommand::LogLevel && words.size() > 1)
        o.level = words[1];
    if (o.policy_dir && o.command != CtlCommand::Check && !(o.command == CtlCommand::Explain && o.policy_file)) {
        *error = "--policy-dir applies to check, and to explain with --policy";
        return std::nullopt;
    }
    const bool explain_options = !o.headers.empty() || o.source || o.token || o.listener || o.policy_file;
    if (explain_options && o.command != CtlCommand::Explain) {
        *error = "-H, --source, --token, --listener and --policy apply to explain only";
        return std::nullopt;
    }
    if (o.command == CtlCommand::Explain) {
        o.method = words[1];
        o.url = words[2];
    }
    if (o.command == CtlCommand::Drain || o.command == CtlCommand::Undrain) {
        o.endpoint = words[1];
        if (o.endpoint.empty()) {
            *error = cmd + " needs an endpoint address, got an empty one";
            return std::nullopt;
        }
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
  explain METHOD URL [-H 'Name: value']... [--source IP] [--token JWT]
          [--listener NAME] [--policy FILE]
                      what the running policy (or FILE, offline) does with
                      this request: each route's conditions as evaluated,
                      the JWT/RBAC/rate-limit stages, the head sent
                      upstream, the cluster and endpoint (hash key and ring
                      position), the response l7fast would send, and
                      whether the kernel or user space handles it and why.
                      URL: /path?query or http://host[:port]/path; the
                      client is 127.0.0.1 unless --source; --token puts a
                      JWT where the policy's providers look for it
  log-level [LEVEL]   show l7fastd's log level, or set it (error, warning,
                      notice, info, debug) until `log-level reset` or a
                      restart, reloads included (needs root or the group
                      "l7fast")
  drain ENDPOINT      send no new request to the upstream endpoint
                      ENDPOINT (IP:PORT or [IPv6]:PORT, as `dump` lists
                      it) on either path; requests in flight finish. Holds
                      across reloads, not a restart (needs root or the
                      group "l7fast")
  undrain ENDPOINT    take the endpoint back into the endpoint choice

Options:
  --json              print one JSON document (stable keys) instead of text
  --policy-dir DIR    check, explain --policy: the drop-in directory to read with FILE
                      (default: policy.d next to FILE; "" for none)
  -h, --help          show this help
  --version           show the version

Exit status: 0 success, 1 operation failed, 2 usage error,
3 l7fastd not reachable, 4 permission denied.
)";
}

}  // namespace l7fast::control
