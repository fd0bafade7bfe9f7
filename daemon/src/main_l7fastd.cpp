// l7fastd: enforces the HTTP policy in /etc/l7fast/policy.toml with the eBPF
// data plane, and in user space wherever the kernel cannot.
#include <getopt.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "Daemon.hpp"
#include "common/Log.hpp"

namespace {

void usage(FILE* out)
{
    std::fprintf(out,
                 "Usage: l7fastd [OPTIONS]\n"
                 "Enforce the HTTP (L7) policy in the kernel with eBPF, and in user space\n"
                 "where the kernel cannot.\n\n"
                 "  -c, --config FILE       policy file (default %s/l7fast/policy.toml)\n"
                 "  -d, --policy-dir DIR    drop-in fragments (default %s/l7fast/policy.d)\n"
                 "      --default-policy    use the embedded default policy instead of a file\n"
                 "      --no-dbus           do not serve org.l7fast.Manager1\n"
                 "      --trace             log every data-plane decision (debug level)\n"
                 "  -l, --log-level LEVEL   error, warning, notice, info (default), debug\n"
                 "  -t, --check             validate the policy and exit\n"
                 "  -V, --version           print the version\n"
                 "  -h, --help              this text\n\n"
                 "SIGHUP or `l7fastctl reload` reloads the policy; a policy that does not\n"
                 "validate is refused and the running one stays.\n",
                 L7FAST_SYSCONFDIR, L7FAST_SYSCONFDIR);
}

}  // namespace

int main(int argc, char** argv)
{
    using namespace l7fast;
    DaemonOptions opts;
    opts.config = std::string(L7FAST_SYSCONFDIR) + "/l7fast/policy.toml";
    opts.policy_dir = std::string(L7FAST_SYSCONFDIR) + "/l7fast/policy.d";
    bool check = false, explicit_config = false;
    enum { OPT_DEFAULT = 256, OPT_NO_DBUS, OPT_TRACE };
    static const option longopts[] = {
        {"config", required_argument, nullptr, 'c'},
        {"policy-dir", required_argument, nullptr, 'd'},
        {"default-policy", no_argument, nullptr, OPT_DEFAULT},
        {"no-dbus", no_argument, nullptr, OPT_NO_DBUS},
        {"trace", no_argument, nullptr, OPT_TRACE},
        {"log-level", required_argument, nullptr, 'l'},
        {"check", no_argument, nullptr, 't'},
        {"version", no_argument, nullptr, 'V'},
        {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0},
    };
    for (int c; (c = getopt_long(argc, argv, "c:d:l:tVh", longopts, nullptr)) != -1;) {
        switch (c) {
        case 'c':
            opts.config = optarg;
            explicit_config = true;
            break;
        case 'd':
            opts.policy_dir = optarg;
            break;
        case OPT_DEFAULT:
            opts.config.clear();
            opts.policy_dir.clear();
            break;
        case OPT_NO_DBUS:
            opts.dbus = false;
            break;
        case OPT_TRACE:
            opts.trace = true;
            opts.log_level = log::Level::Debug;
            log::set_level(log::Level::Debug);
            break;
        case 'l': {
            log::Level lv;
            if (!log::parse_level(optarg, &lv)) {
                std::fprintf(stderr, "l7fastd: unknown log level '%s'\n", optarg);
                return 2;
            }
            if (!opts.trace)
                opts.log_level = lv;
            log::set_level(*opts.log_level);
            break;
        }
        case 't':
            check = true;
            break;
        case 'V':
            std::printf("l7fastd %s\n", L7FAST_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        std::fprintf(stderr, "l7fastd: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!opts.config.empty() && !explicit_config && !std::filesystem::exists(opts.config)) {
        log::error("no policy at ", opts.config,
                   ": install one (see l7fast.toml(5)) or run with --default-policy");
        return 1;
    }
    if (check) {
        policy::Policy pol;
        std::string err = Daemon::load_policy(opts.config, opts.policy_dir, &pol);
        if (!err.empty()) {
            std::fprintf(stderr, "%s", err.c_str());
            return 1;
        }
        std::printf("policy OK: %zu listeners, %zu clusters, %zu routes\n", pol.listeners.size(),
                    pol.clusters.size(), pol.routes.size());
        return 0;
    }
    // every connection is a descriptor (two, with a pooled upstream): use
    // all the descriptors the hard limit allows
    rlimit nofile{};
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    try {
        Daemon daemon(opts);
        daemon.start();
        return daemon.run();
    } catch (const std::exception& e) {
        log::error(e.what());
        return 1;
    }
}
