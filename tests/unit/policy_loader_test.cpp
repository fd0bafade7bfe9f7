// PolicyLoader: valid policies, drop-in fragments, and every validation
// error with its exact message and position (docs/policy.md).
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/PolicyLoader.hpp"
#include "support/TempDir.hpp"

using namespace l7fast::policy;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(L7FAST_TEST_DATA) / "policy";

// Six lines every case below is appended to: its own text starts on line 7.
constexpr const char* kBase =
    "[[listener]]\n"
    "name = \"web\"\n"
    "address = \"127.0.0.1:8080\"\n"
    "[[cluster]]\n"
    "name = \"app\"\n"
    "endpoints = [ { address = \"127.0.0.1:9001\" } ]\n";

std::vector<std::string> errors_of(const std::string& text)
{
    PolicyLoadResult r = PolicyLoader::load_string(text, "t.toml");
    std::vector<std::string> out;
    for (const PolicyError& e : r.errors())
        out.push_back(e.str());
    return out;
}

std::string first_error(const std::string& text)
{
    const std::vector<std::string> errors = errors_of(text);
    return errors.empty() ? "(loaded without error)" : errors.front();
}

SocketAddress addr(const std::string& text)
{
    std::string why;
    auto a = SocketAddress::parse(text, &why);
    if (!a)
        throw std::invalid_argument(why);
    return *a;
}

using l7fast::test::TempDir;

}  // namespace

// ---- valid policies ------------------------------------------------------------------

TEST(PolicyLoader, EveryKeyOfTheFormat)
{
    const fs::path file = kData / "full.toml";
    PolicyLoadResult r = PolicyLoader::load(file, "");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const Policy& p = r.policy();

    const DaemonSettings& d = p.daemon;
    EXPECT_EQ(d.cgroup, "/sys/fs/cgroup/l7fast.slice");
    EXPECT_EQ(d.bpffs, "/sys/fs/bpf/l7fast-test");
    EXPECT_EQ(d.ingress_budget, 131072u);
    EXPECT_FALSE(d.kernel_dataplane);
    EXPECT_FALSE(d.offload_remote_clients);
    EXPECT_EQ(d.pool_min_idle, 4u);
    EXPECT_EQ(d.pool_max, 8u);
    EXPECT_EQ(d.connect_timeout.count(), 250);
    EXPECT_EQ(d.request_timeout.count(), 30000);
    EXPECT_EQ(d.header_timeout.count(), 5000);
    EXPECT_EQ(d.idle_timeout.count(), 120000);
    EXPECT_EQ(d.log_level, "debug");

    ASSERT_EQ(p.listeners.size(), 3u);
    EXPECT_EQ(p.listeners[0].name, "web");
    EXPECT_EQ(p.listeners[0].address, addr("127.0.0.1:8080"));
    EXPECT_EQ(p.listeners[0].where.str(), file.string() + ":16:1");
    EXPECT_EQ(p.listeners[1].address.family, AF_INET6);
    EXPECT_EQ(p.listeners[1].address.str(), "[::1]:8080");
    EXPECT_TRUE(p.listeners[2].address.is_wildcard());
    EXPECT_FALSE(p.listeners[0].address.is_wildcard());

    ASSERT_EQ(p.clusters.size(), 2u);
    EXPECT_EQ(p.clusters[0].name, "app");
    EXPECT_EQ(p.clusters[0].lb, LbPolicy::Weighted);
    ASSERT_EQ(p.clusters[0].endpoints.size(), 2u);
    EXPECT_EQ(p.clusters[0].endpoints[0].address, addr("127.0.0.1:9001"));
    EXPECT_EQ(p.clusters[0].endpoints[0].weight, 3u);
    EXPECT_EQ(p.clusters[0].endpoints[1].weight, 1u) << "default weight";
    EXPECT_EQ(p.clusters[1].lb, LbPolicy::RoundRobin) << "default lb";
    EXPECT_EQ(p.clusters[1].endpoints[0].address, addr("[::1]:9003"));

    ASSERT_EQ(p.routes.size(), 3u);
    const Route& api = p.routes[0];
    EXPECT_EQ(api.name, "api");
    EXPECT_EQ(api.listeners, (std::vector<std::string>{"web", "web6"}));
    EXPECT_FALSE(api.offload);
    ASSERT_EQ(api.clusters.size(), 2u);
    EXPECT_EQ(api.clusters[0].cluster, "app");
    EXPECT_EQ(api.clusters[0].weight, 90u);
    EXPECT_EQ(api.clusters[1].cluster, "canary");
    EXPECT_EQ(api.clusters[1].weight, 10u);
    EXPECT_EQ(api.match.methods, (std::vector<std::string>{"GET", "HEAD"})) << "duplicates dropped";
    EXPECT_EQ(api.match.host, "api.example.com") << "lower-cased";
    EXPECT_EQ(api.match.path_kind, PathMatch::Prefix);
    EXPECT_EQ(api.match.path, "/api/");
    ASSERT_EQ(api.match.headers.size(), 2u);
    EXPECT_EQ(api.match.headers[0].name, "x-canary") << "lower-cased";
    EXPECT_EQ(api.match.headers[0].kind, HeaderCondition::Kind::Exact);
    EXPECT_EQ(api.match.headers[0].value, "1");
    EXPECT_EQ(api.match.headers[1].name, "x-debug");
    EXPECT_EQ(api.match.headers[1].kind, HeaderCondition::Kind::Present);
    EXPECT_EQ(api.where.str(), file.string() + ":37:1");

    const Route& health = p.routes[1];
    EXPECT_EQ(health.match.methods, std::vector<std::string>{"GET"});
    EXPECT_EQ(health.match.path_kind, PathMatch::Exact);
    EXPECT_EQ(health.match.path, "/healthz");
    EXPECT_EQ(health.match.host, "[::1]");
    EXPECT_TRUE(health.listeners.empty());
    EXPECT_TRUE(health.offload) << "default offload";
    ASSERT_EQ(health.clusters.size(), 1u);
    EXPECT_EQ(health.clusters[0].cluster, "app");
    EXPECT_EQ(health.clusters[0].weight, 1u);

    const Route& rest = p.routes[2];
    EXPECT_TRUE(rest.match.methods.empty());
    EXPECT_FALSE(rest.match.host);
    EXPECT_EQ(rest.match.path_kind, PathMatch::Any);
    EXPECT_TRUE(rest.match.headers.empty());

    EXPECT_EQ(p.sources, std::vector<std::string>{file.string()});
    EXPECT_EQ(p.find_cluster("canary"), &p.clusters[1]);
    EXPECT_EQ(p.find_cluster("nope"), nullptr);
    EXPECT_EQ(p.find_listener("public"), &p.listeners[2]);
}

TEST(PolicyLoader, DefaultsOfAMinimalPolicy)
{
    PolicyLoadResult r = PolicyLoader::load_string(kBase, "min.toml");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const DaemonSettings d = r.policy().daemon;
    const DaemonSettings defaults;
    EXPECT_EQ(d.cgroup, defaults.cgroup);
    EXPECT_EQ(d.bpffs, defaults.bpffs);
    EXPECT_EQ(d.ingress_budget, 65536u);
    EXPECT_TRUE(d.kernel_dataplane);
    EXPECT_TRUE(d.offload_remote_clients);
    EXPECT_EQ(d.pool_min_idle, 2u);
    EXPECT_EQ(d.pool_max, 1024u);
    EXPECT_EQ(d.connect_timeout.count(), 1000);
    EXPECT_EQ(d.log_level, "info");
    EXPECT_TRUE(r.policy().routes.empty());
    EXPECT_EQ(r.policy().sources, std::vector<std::string>{"min.toml"});
}

TEST(PolicyLoader, SingleStringsForListsAndInlineArraysOfTables)
{
    PolicyLoadResult r = PolicyLoader::load_string(
        "listener = [ { name = \"web\", address = \"0.0.0.0:8080\" } ]\n"
        "cluster = [ { name = \"app\", endpoints = [ { address = \"10.0.0.2:80\" } ] } ]\n"
        "route = [ { name = \"r\", listeners = \"web\", cluster = \"app\", match = { method = \"POST\" } } ]\n",
        "inline.toml");
    ASSERT_TRUE(r.ok()) << r.error_text();
    EXPECT_EQ(r.policy().routes[0].listeners, std::vector<std::string>{"web"});
    EXPECT_EQ(r.policy().routes[0].match.methods, std::vector<std::string>{"POST"});
}

TEST(PolicyLoader, TheShippedDefaultPolicyIsValid)
{
    const fs::path file = fs::path(L7FAST_TEST_DATA) / ".." / ".." / "packaging" / "policy.toml";
    PolicyLoadResult r = PolicyLoader::load(file, "");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const Policy& p = r.policy();
    ASSERT_EQ(p.listeners.size(), 1u);
    EXPECT_EQ(p.listeners[0].address, addr("127.0.0.1:8080"));
    EXPECT_GE(p.clusters.size(), 2u);
    bool weighted = false, prefix = false, header = false, catch_all = false;
    for (const Route& route : p.routes) {
        weighted |= route.clusters.size() > 1;
        prefix |= route.match.path_kind == PathMatch::Prefix;
        header |= !route.match.headers.empty();
        catch_all = route.match.methods.empty() && !route.match.host && route.match.path_kind == PathMatch::Any &&
                    route.match.headers.empty() && route.listeners.empty();
    }
    EXPECT_TRUE(weighted && prefix && header);
    EXPECT_TRUE(catch_all) << "the last route takes everything";
    for (const Cluster& c : p.clusters)
        for (const Endpoint& e : c.endpoints)
            EXPECT_TRUE(e.address == addr("127.0.0.1:9001") || e.address == addr("127.0.0.1:9002")) << e.address.str();
}

// ---- health checks and outlier detection ---------------------------------------------

TEST(PolicyLoader, HealthCheckAndOutlierDetectionDefaults)
{
    PolicyLoadResult r = PolicyLoader::load_string(std::string(kBase) +
                                                       "health_check = {}\n"
                                                       "outlier_detection = {}\n"
                                                       "[[cluster]]\n"
                                                       "name = \"plain\"\n"
                                                       "endpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
                                                   "t.toml");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const Policy& p = r.policy();
    ASSERT_EQ(p.clusters.size(), 2u);
    ASSERT_TRUE(p.clusters[0].health_check);
    const HealthCheck& hc = *p.clusters[0].health_check;
    EXPECT_EQ(hc.path, "/");
    EXPECT_EQ(hc.host, "") << "the endpoint's address";
    EXPECT_EQ(hc.interval.count(), 5000);
    EXPECT_EQ(hc.timeout.count(), 1000);
    EXPECT_EQ(hc.healthy_threshold, 2u);
    EXPECT_EQ(hc.unhealthy_threshold, 3u);
    EXPECT_TRUE(hc.expected_status.empty()) << "any 2xx or 3xx";
    EXPECT_TRUE(hc.passes(200));
    EXPECT_TRUE(hc.passes(399));
    EXPECT_FALSE(hc.passes(199));
    EXPECT_FALSE(hc.passes(404));
    EXPECT_EQ(hc.where.str(), "t.toml:7:16");
    ASSERT_TRUE(p.clusters[0].outlier_detection);
    const OutlierDetection& od = *p.clusters[0].outlier_detection;
    EXPECT_EQ(od.consecutive_5xx, 5u);
    EXPECT_EQ(od.consecutive_connect_failures, 5u);
    EXPECT_EQ(od.base_ejection.count(), 30000);
    EXPECT_EQ(od.max_ejection.count(), 300000);
    EXPECT_EQ(od.max_ejection_percent, 50u);
    EXPECT_EQ(od.where.str(), "t.toml:8:21");
    EXPECT_FALSE(p.clusters[1].health_check) << "no active checks unless asked for";
    EXPECT_FALSE(p.clusters[1].outlier_detection) << "no passive ejection unless asked for";
}

TEST(PolicyLoader, HealthCheckAndOutlierDetectionEveryKey)
{
    PolicyLoadResult r = PolicyLoader::load_string(
        std::string(kBase) +
            "[[cluster]]\n"                                                          // 7
            "name = \"sticky\"\n"                                                    // 8
            "lb = \"maglev\"\n"                                                      // 9
            "hash_key = { source_ip = true }\n"                                      // 10
            "endpoints = [ { address = \"127.0.0.1:9002\" }, { address = \"127.0.0.1:9003\" } ]\n"
            "[cluster.health_check]\n"                                               // 12
            "path = \"/healthz?full=1\"\n"
            "host = \"App.internal:8443\"\n"
            "interval_ms = 2000\n"
            "timeout_ms = 1999\n"
            "healthy_threshold = 1\n"
            "unhealthy_threshold = 100\n"
            "expected_status = [200, 204, 418]\n"
            "[cluster.outlier_detection]\n"                                          // 20
            "consecutive_5xx = 0\n"
            "consecutive_connect_failures = 1000\n"
            "base_ejection_ms = 100\n"
            "max_ejection_ms = 100\n"
            "max_ejection_percent = 100\n"
            "[[cluster]]\n"                                                          // 26
            "name = \"single\"\n"
            "lb = \"weighted\"\n"
            "endpoints = [ { address = \"127.0.0.1:9004\" } ]\n"
            "health_check = { expected_status = 503, interval_ms = 3600000, timeout_ms = 600000 }\n"  // 30
            "outlier_detection = { consecutive_5xx = 1000, consecutive_connect_failures = 0, "
            "base_ejection_ms = 86400000, max_ejection_ms = 86400000, max_ejection_percent = 1 }\n",
        "t.toml");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const Policy& p = r.policy();
    ASSERT_EQ(p.clusters.size(), 3u);
    EXPECT_FALSE(p.clusters[0].health_check);

    ASSERT_TRUE(p.clusters[1].health_check);
    const HealthCheck& hc = *p.clusters[1].health_check;
    EXPECT_EQ(hc.path, "/healthz?full=1") << "sent as written, query included";
    EXPECT_EQ(hc.host, "App.internal:8443") << "sent as written";
    EXPECT_EQ(hc.interval.count(), 2000);
    EXPECT_EQ(hc.timeout.count(), 1999);
    EXPECT_EQ(hc.healthy_threshold, 1u);
    EXPECT_EQ(hc.unhealthy_threshold, 100u);
    EXPECT_EQ(hc.expected_status, (std::vector<uint16_t>{200, 204, 418}));
    EXPECT_TRUE(hc.passes(418));
    EXPECT_FALSE(hc.passes(302)) << "only the listed statuses";
    EXPECT_EQ(hc.where.str(), "t.toml:12:1");
    ASSERT_TRUE(p.clusters[1].outlier_detection);
    const OutlierDetection& od = *p.clusters[1].outlier_detection;
    EXPECT_EQ(od.consecutive_5xx, 0u) << "off";
    EXPECT_EQ(od.consecutive_connect_failures, 1000u);
    EXPECT_EQ(od.base_ejection.count(), 100);
    EXPECT_EQ(od.max_ejection.count(), 100) << "may equal the base";
    EXPECT_EQ(od.max_ejection_percent, 100u);
    EXPECT_EQ(od.where.str(), "t.toml:20:1");

    ASSERT_TRUE(p.clusters[2].health_check);
    const HealthCheck& single = *p.clusters[2].health_check;
    EXPECT_EQ(single.expected_status, std::vector<uint16_t>{503}) << "one status without an array";
    EXPECT_TRUE(single.passes(503));
    EXPECT_FALSE(single.passes(200));
    EXPECT_EQ(single.interval.count(), 3600000);
    EXPECT_EQ(single.timeout.count(), 600000);
    EXPECT_EQ(single.where.str(), "t.toml:30:16");
    ASSERT_TRUE(p.clusters[2].outlier_detection);
    const OutlierDetection& od2 = *p.clusters[2].outlier_detection;
    EXPECT_EQ(od2.consecutive_5xx, 1000u);
    EXPECT_EQ(od2.consecutive_connect_failures, 0u) << "off";
    EXPECT_EQ(od2.base_ejection.count(), 86400000);
    EXPECT_EQ(od2.max_ejection.count(), 86400000);
    EXPECT_EQ(od2.max_ejection_percent, 1u);
}

TEST(PolicyLoader, HealthCheckPathAndHostLengths)
{
    const std::string check = std::string(kBase) + "[cluster.health_check]\n";
    EXPECT_EQ(first_error(check + "path = \"/" + std::string(1023, 'a') + "\"\n"), "(loaded without error)");
    EXPECT_EQ(first_error(check + "path = \"/" + std::string(1024, 'a') + "\"\n"),
              "t.toml:8:8: cluster \"app\".health_check.path: the path is 1025 bytes long; at most 1024");
    EXPECT_EQ(first_error(check + "host = \"" + std::string(255, 'h') + "\"\n"), "(loaded without error)");
    EXPECT_EQ(first_error(check + "host = \"" + std::string(256, 'h') + "\"\n"),
              "t.toml:8:8: cluster \"app\".health_check.host: the host is 256 bytes long; at most 255");
}

// ---- drop-in fragments ------------------------------------------------------------

TEST(PolicyLoader, FragmentsLoadAfterTheMainFileInNameOrder)
{
    const fs::path dir = kData / "fragments";
    PolicyLoadResult r = PolicyLoader::load(dir / "main.toml", dir / "policy.d");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const Policy& p = r.policy();
    EXPECT_EQ(p.sources, (std::vector<std::string>{(dir / "main.toml").string(),
                                                   (dir / "policy.d" / "05-extra.toml").string(),
                                                   (dir / "policy.d" / "10-api.toml").string(),
                                                   (dir / "policy.d" / "20-late.toml").string()}))
        << "dot files and names not ending in .toml are skipped";
    std::vector<std::string> routes;
    for (const Route& route : p.routes)
        routes.push_back(route.name);
    EXPECT_EQ(routes, (std::vector<std::string>{"main-first", "extra-route", "api", "api-2", "late"}));
    ASSERT_EQ(p.listeners.size(), 2u);
    EXPECT_EQ(p.listeners[1].name, "admin");
    EXPECT_EQ(p.clusters[1].name, "extra");
    EXPECT_EQ(p.daemon.log_level, "notice");
    EXPECT_EQ(p.routes[2].where.str(), (dir / "policy.d" / "10-api.toml").string() + ":2:1");
}

TEST(PolicyLoader, MissingDropInDirectoryIsFine)
{
    const fs::path dir = kData / "fragments";
    PolicyLoadResult r = PolicyLoader::load(dir / "main.toml", dir / "no-such-dir");
    ASSERT_TRUE(r.ok()) << r.error_text();
    EXPECT_EQ(r.policy().routes.size(), 1u);
}

TEST(PolicyLoader, DaemonSectionOnlyInTheMainFile)
{
    const fs::path dir = kData / "daemon-in-fragment";
    PolicyLoadResult r = PolicyLoader::load(dir / "main.toml", dir / "policy.d");
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.errors().size(), 1u);
    EXPECT_EQ(r.errors()[0].str(), (dir / "policy.d" / "10-daemon.toml").string() +
                                       ":2:2: daemon: [daemon] is only allowed in the main policy file; move these "
                                       "settings there");
}

TEST(PolicyLoader, NamesAreUniqueAcrossFiles)
{
    const fs::path dir = kData / "duplicates";
    const std::string main = (dir / "main.toml").string();
    const std::string frag = (dir / "policy.d" / "10-dup.toml").string();
    PolicyLoadResult r = PolicyLoader::load(main, dir / "policy.d");
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.errors().size(), 2u) << r.error_text();
    EXPECT_EQ(r.errors()[0].str(), frag + ":2:8: cluster \"app\".name: cluster name \"app\" is already used at " + main +
                                       ":6:8; names must be unique across all files");
    EXPECT_EQ(r.errors()[1].str(), frag + ":6:8: route \"api\".name: route name \"api\" is already used at " + main +
                                       ":10:8; names must be unique across all files");
}

TEST(PolicyLoader, ReferencesResolveAcrossSourcesInAnyOrder)
{
    const std::vector<PolicySource> sources{
        {"main.toml", "[[route]]\nname = \"r\"\ncluster = \"later\"\nlisteners = [\"web\"]\n"},
        {"10.toml", "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:8080\"\n"},
        {"20.toml", "[[cluster]]\nname = \"later\"\nendpoints = [ { address = \"127.0.0.1:9001\" } ]\n"},
    };
    PolicyLoadResult r = PolicyLoader::load_sources(sources);
    ASSERT_TRUE(r.ok()) << r.error_text();
    EXPECT_EQ(r.policy().sources, (std::vector<std::string>{"main.toml", "10.toml", "20.toml"}));
}

TEST(PolicyLoader, SyntaxErrorInAFragmentDoesNotBlameTheMainFile)
{
    const std::vector<PolicySource> sources{
        {"main.toml", std::string(kBase) + "[[route]]\nname = \"r\"\ncluster = \"in-fragment\"\n"},
        {"10.toml", "[[cluster]]\nname = \"in-fragment\"\nendpoints = [ { address = \"127.0.0.1:9002\" }\n"},
    };
    PolicyLoadResult r = PolicyLoader::load_sources(sources);
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.errors().size(), 1u) << r.error_text();
    EXPECT_EQ(r.errors()[0].file, "10.toml");
    EXPECT_EQ(r.errors()[0].line, 3u);
}

// ---- files that cannot be read ----------------------------------------------------

TEST(PolicyLoader, UnreadableMainFile)
{
    TempDir tmp;
    const fs::path missing = tmp.path() / "nope.toml";
    PolicyLoadResult r = PolicyLoader::load(missing, "");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error_text(), missing.string() + ": cannot read: No such file or directory\n");

    PolicyLoadResult dir = PolicyLoader::load(tmp.path(), "");
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.error_text(), tmp.path().string() + ": cannot read: not a regular file\n");
}

TEST(PolicyLoader, UnreadableFragment)
{
    TempDir tmp;
    const fs::path main = tmp.write("main.toml", kBase);
    fs::create_directories(tmp.path() / "policy.d");
    fs::create_symlink(tmp.path() / "gone.toml", tmp.path() / "policy.d" / "10-dangling.toml");
    PolicyLoadResult r = PolicyLoader::load(main, tmp.path() / "policy.d");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error_text(),
              (tmp.path() / "policy.d" / "10-dangling.toml").string() + ": cannot read: No such file or directory\n");
}

TEST(PolicyLoader, DropInPathThatIsNotADirectory)
{
    TempDir tmp;
    const fs::path main = tmp.write("main.toml", kBase);
    PolicyLoadResult r = PolicyLoader::load(main, main);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error_text(), main.string() + ": cannot read drop-in directory: Not a directory\n");
}

TEST(PolicyLoader, OversizedFileIsRefused)
{
    TempDir tmp;
    const fs::path big = tmp.write("big.toml", std::string(PolicyLoader::kMaxFileBytes + 1, '#'));
    PolicyLoadResult r = PolicyLoader::load(big, "");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error_text(), big.string() + ": larger than 16 MiB; refusing to parse it\n");
}

// ---- results ------------------------------------------------------------------------

TEST(PolicyLoader, ErrorsAreSortedAndCapped)
{
    std::string text = kBase;
    for (int i = 0; i < 30; i++)
        text += "[[route]]\nname = \"r" + std::to_string(i) + "\"\ncluster = \"app\"\nbogus = " + std::to_string(i) + "\n";
    text = "[daemon]\npool_max = 0\n" + text;
    const std::vector<std::string> errors = errors_of(text);
    ASSERT_EQ(errors.size(), PolicyLoader::kMaxErrors);
    EXPECT_EQ(errors[0], "t.toml:2:12: daemon.pool_max: 0 is out of range 1..1024 (pooled kernel-path connections "
                         "per endpoint; the data plane's pools hold at most 1024)");
    EXPECT_EQ(errors[1], "t.toml:12:1: route \"r0\".bogus: unknown key; allowed here: name, listeners, offload, "
                         "cluster, clusters, direct_response, match, jwt, rbac, rate_limit, request_headers, "
                         "response_headers, timeout_ms, connect_retries");
    EXPECT_EQ(errors[19], "t.toml:84:1: route \"r18\".bogus: unknown key; allowed here: name, listeners, offload, "
                          "cluster, clusters, direct_response, match, jwt, rbac, rate_limit, request_headers, "
                          "response_headers, timeout_ms, connect_retries");
}

TEST(PolicyLoader, ErrorText)
{
    EXPECT_EQ((PolicyError{"f.toml", 3, 9, "route \"a\".cluster", "no cluster named \"b\""}).str(),
              "f.toml:3:9: route \"a\".cluster: no cluster named \"b\"");
    EXPECT_EQ((PolicyError{"f.toml", 3, 9, "", "TOML syntax error: x"}).str(), "f.toml:3:9: TOML syntax error: x");
    EXPECT_EQ((PolicyError{"f.toml", 0, 0, "", "cannot read: Permission denied"}).str(),
              "f.toml: cannot read: Permission denied");
    PolicyLoadResult failed(std::vector<PolicyError>{{"f.toml", 1, 2, "k", "m"}});
    EXPECT_FALSE(failed);
    EXPECT_THROW((void)failed.policy(), std::logic_error);
    EXPECT_EQ(failed.error_text(), "f.toml:1:2: k: m\n");
}

TEST(PolicyLoader, NoListenerAtAll)
{
    EXPECT_EQ(first_error(""), "t.toml:1:1: listener: the policy defines no listener; add a [[listener]] with a name "
                               "and an address");
}

TEST(PolicyLoader, SingleTableWhereAnArrayOfTablesBelongs)
{
    EXPECT_EQ(first_error("[listener]\nname = \"web\"\naddress = \"127.0.0.1:8080\"\n"),
              "t.toml:1:1: listener: expected an array of tables ([[listener]]), got a table");
}

// ---- every validation error: exact message, exact position -------------------------

struct ErrorCase {
    const char* name;
    const char* toml;      // appended to kBase: its first line is line 7
    const char* expected;  // the first error's str()
    bool top_level = false;  // put before kBase (after it, keys would belong to [[cluster]]): line 1
};

void PrintTo(const ErrorCase& c, std::ostream* os)
{
    *os << c.name;
}

class PolicyLoaderError : public testing::TestWithParam<ErrorCase> {};

TEST_P(PolicyLoaderError, FirstErrorIsExact)
{
    const ErrorCase& c = GetParam();
    EXPECT_EQ(first_error(c.top_level ? c.toml + std::string(kBase) : kBase + std::string(c.toml)), c.expected);
}

// clang-format off
const ErrorCase kErrorCases[] = {
    // TOML itself
    {"syntax_table_header", "[[route]\n",
     "t.toml:7:9: TOML syntax error: Error while parsing table header: expected ']', saw '\\n'"},
    {"syntax_redefined_key", "[[route]]\nname = \"a\"\nname = \"b\"\n",
     "t.toml:9:8: TOML syntax error: Error while parsing key-value pair: cannot redefine existing string 'name'"},
    {"syntax_bad_escape", "[[route]]\nname = \"a\\q\"\n",
     "t.toml:8:11: TOML syntax error: Error while parsing string: unknown escape sequence '\\q'"},

    // unknown keys, at every level
    {"unknown_top_level", "routes = []\n",
     "t.toml:1:1: routes: unknown key (did you mean \"route\"?); allowed here: daemon, listener, cluster, route, jwt_provider", true},
    {"unknown_quoted_key", "\"my key\" = 1\n",
     "t.toml:1:1: \"my key\": unknown key; allowed here: daemon, listener, cluster, route, jwt_provider", true},
    {"key_after_a_table_belongs_to_it", "routes = []\n",
     "t.toml:7:1: cluster \"app\".routes: unknown key; allowed here: name, lb, endpoints, hash_key, ring_min_size, "
     "ring_max_size, maglev_table_size, hash_balance_factor, health_check, outlier_detection"},
    {"unknown_daemon", "[daemon]\npoolmax = 3\n",
     "t.toml:8:1: daemon.poolmax: unknown key (did you mean \"pool_max\"?); allowed here: cgroup, bpffs, "
     "ingress_budget, kernel_dataplane, offload_remote_clients, pool_min_idle, pool_max, connect_timeout_ms, "
     "request_timeout_ms, header_timeout_ms, idle_timeout_ms, log_level, metrics_address, access_log_sample, "
     "access_log_format"},
    {"unknown_listener", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:8081\"\nport = 1\n",
     "t.toml:10:1: listener \"b\".port: unknown key; allowed here: name, address"},
    {"unknown_cluster", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\npolicy = 1\n",
     "t.toml:10:1: cluster \"b\".policy: unknown key; allowed here: name, lb, endpoints, hash_key, ring_min_size, "
     "ring_max_size, maglev_table_size, hash_balance_factor, health_check, outlier_detection"},
    {"unknown_endpoint", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\nendpoints = [ { address = \"127.0.0.1:9002\", weigth = 2 } ]\n",
     "t.toml:10:45: cluster \"b\".endpoints[0].weigth: unknown key (did you mean \"weight\"?); allowed here: address, weight"},
    {"unknown_route", "[[route]]\nname = \"r\"\ncluster = \"app\"\nmethod = \"GET\"\n",
     "t.toml:10:1: route \"r\".method: unknown key; allowed here: name, listeners, offload, cluster, clusters, "
     "direct_response, match, jwt, rbac, rate_limit, request_headers, response_headers, timeout_ms, connect_retries"},
    {"unknown_match", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethods = \"GET\"\n",
     "t.toml:11:1: route \"r\".match.methods: unknown key (did you mean \"method\"?); allowed here: method, host, "
     "path_exact, path_prefix, path_regex, headers, query, source, claims"},
    {"unknown_header", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", present = true, value = \"1\" } ]\n",
     "t.toml:11:43: route \"r\".match.headers[0].value: unknown key; allowed here: name, exact, prefix, present, "
     "absent"},
    {"unknown_weighted_cluster", "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\", cluster = \"app\" } ]\n",
     "t.toml:9:30: route \"r\".clusters[0].cluster: unknown key; allowed here: name, weight"},

    // wrong types
    {"type_integer_for_string", "[[listener]]\nname = \"b\"\naddress = 8081\n",
     "t.toml:9:11: listener \"b\".address: expected a string, got an integer"},
    {"type_string_for_integer", "[daemon]\npool_max = \"8\"\n",
     "t.toml:8:12: daemon.pool_max: expected an integer, got a string"},
    {"type_float_for_integer", "[daemon]\nconnect_timeout_ms = 1.5\n",
     "t.toml:8:22: daemon.connect_timeout_ms: expected an integer, got a floating-point number"},
    {"type_string_for_bool", "[daemon]\nkernel_dataplane = \"yes\"\n",
     "t.toml:8:20: daemon.kernel_dataplane: expected a boolean (true or false), got a string"},
    {"type_daemon_array", "daemon = []\n",
     "t.toml:1:10: daemon: expected a table ([daemon]), got an array", true},
    {"type_route_element", "route = [\"r\"]\n",
     "t.toml:1:10: route[0]: expected a table, got a string", true},
    {"type_method_integer", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = 1\n",
     "t.toml:11:10: route \"r\".match.method: expected a string or an array of strings, got an integer"},
    {"type_method_element", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = [\"GET\", 2]\n",
     "t.toml:11:18: route \"r\".match.method[1]: expected a string, got an integer"},
    {"type_endpoints_table", "[[cluster]]\nname = \"b\"\nendpoints = { address = \"127.0.0.1:9002\" }\n",
     "t.toml:9:13: cluster \"b\".endpoints: expected an array of endpoint tables, got a table"},
    {"type_endpoint_string", "[[cluster]]\nname = \"b\"\nendpoints = [\"127.0.0.1:9002\"]\n",
     "t.toml:9:14: cluster \"b\".endpoints[0]: expected a table, got a string"},
    {"type_match_string", "[[route]]\nname = \"r\"\ncluster = \"app\"\nmatch = \"/\"\n",
     "t.toml:10:9: route \"r\".match: expected a table, got a string"},
    {"type_headers_table", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = { name = \"x\" }\n",
     "t.toml:11:11: route \"r\".match.headers: expected an array of header tables, got a table"},
    {"type_weight_string", "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\", weight = \"5\" } ]\n",
     "t.toml:9:39: route \"r\".clusters[0].weight: expected an integer, got a string"},
    {"type_offload_string", "[[route]]\nname = \"r\"\ncluster = \"app\"\noffload = \"no\"\n",
     "t.toml:10:11: route \"r\".offload: expected a boolean (true or false), got a string"},

    // missing keys
    {"missing_listener_name", "[[listener]]\naddress = \"127.0.0.1:8081\"\n",
     "t.toml:7:1: listener[1].name: missing; every listener needs a unique name"},
    {"missing_listener_address", "[[listener]]\nname = \"b\"\n",
     "t.toml:7:1: listener \"b\".address: missing; give the address to listen on, e.g. \"127.0.0.1:8080\""},
    {"missing_endpoints", "[[cluster]]\nname = \"b\"\n",
     "t.toml:7:1: cluster \"b\".endpoints: missing; a cluster needs at least one endpoint, e.g. "
     "[ { address = \"127.0.0.1:9001\" } ]"},
    {"missing_endpoint_address", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\nendpoints = [ { weight = 1 } ]\n",
     "t.toml:10:15: cluster \"b\".endpoints[0].address: missing; give the backend's \"ip:port\""},
    {"missing_route_cluster", "[[route]]\nname = \"r\"\n",
     "t.toml:7:1: route \"r\".cluster: missing; a route needs \"cluster\" (one cluster), \"clusters\" (weighted) or "
     "\"direct_response\""},
    {"missing_route_name", "[[route]]\ncluster = \"app\"\n",
     "t.toml:7:1: route[0].name: missing; every route needs a unique name"},
    {"missing_weighted_cluster_name", "[[route]]\nname = \"r\"\nclusters = [ { weight = 1 } ]\n",
     "t.toml:9:14: route \"r\".clusters[0].name: missing; give the cluster's name"},
    {"missing_header_name", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { present = true } ]\n",
     "t.toml:11:13: route \"r\".match.headers[0].name: missing; give the header's field name, e.g. \"x-canary\""},

    // names
    {"name_with_space", "[[cluster]]\nname = \"my app\"\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:8:8: cluster[1].name: \"my app\" is not a valid name: use 1..64 letters, digits, '.', '_' or '-'"},
    {"name_empty", "[[route]]\nname = \"\"\ncluster = \"app\"\n",
     "t.toml:8:8: route[0].name: \"\" is not a valid name: use 1..64 letters, digits, '.', '_' or '-'"},
    {"name_too_long", "[[route]]\nname = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\ncluster = \"app\"\n",
     "t.toml:8:8: route[0].name: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" is not a valid name: "
     "use 1..64 letters, digits, '.', '_' or '-'"},

    // duplicates within one file
    {"duplicate_listener_name", "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:8081\"\n",
     "t.toml:8:8: listener \"web\".name: listener name \"web\" is already used at t.toml:2:8; names must be unique "
     "across all files"},
    {"duplicate_route_name", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[[route]]\nname = \"r\"\ncluster = \"app\"\n",
     "t.toml:11:8: route \"r\".name: route name \"r\" is already used at t.toml:8:8; names must be unique across all files"},
    {"duplicate_listener_address", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:8080\"\n",
     "t.toml:9:11: listener \"b\".address: 127.0.0.1:8080 is already used by listener \"web\" (t.toml:3:11)"},
    {"wildcard_listener_after_specific", "[[listener]]\nname = \"all\"\naddress = \"0.0.0.0:8080\"\n",
     "t.toml:9:11: listener \"all\".address: 0.0.0.0:8080 takes every address on port 8080, including that of "
     "listener \"web\" on 127.0.0.1:8080 (t.toml:3:11)"},
    {"specific_listener_after_wildcard", "[[listener]]\nname = \"all\"\naddress = \"0.0.0.0:8090\"\n"
     "[[listener]]\nname = \"one\"\naddress = \"127.0.0.5:8090\"\n",
     "t.toml:12:11: listener \"one\".address: 127.0.0.5:8090 overlaps listener \"all\" on 0.0.0.0:8090 (t.toml:9:11), "
     "which already takes every address on port 8090"},
    {"wildcards_of_both_families_coexist", "[[listener]]\nname = \"all4\"\naddress = \"0.0.0.0:8090\"\n"
     "[[listener]]\nname = \"all6\"\naddress = \"[::]:8090\"\n[[listener]]\nname = \"x\"\naddress = \"[::1]:8090\"\n",
     "t.toml:15:11: listener \"x\".address: [::1]:8090 overlaps listener \"all6\" on [::]:8090 (t.toml:12:11), "
     "which already takes every address on port 8090"},
    {"duplicate_endpoint", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.1:9002\" }, { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:9:59: cluster \"b\".endpoints[1].address: 127.0.0.1:9002 is listed twice in this cluster (also "
     "endpoints[0]); use weights instead"},
    {"duplicate_weighted_cluster", "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\" }, { name = \"app\" } ]\n",
     "t.toml:9:41: route \"r\".clusters[1].name: cluster \"app\" is listed twice; give it one entry with the summed weight"},
    {"duplicate_header_condition", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\n"
     "headers = [ { name = \"x-a\", present = true }, { name = \"X-A\", exact = \"1\" } ]\n",
     "t.toml:11:56: route \"r\".match.headers[1].name: header \"x-a\" already has a condition in headers[0]; a route "
     "takes one condition per header"},

    // references
    {"dangling_cluster_guess", "[[route]]\nname = \"r\"\ncluster = \"ap\"\n",
     "t.toml:9:11: route \"r\".cluster: no cluster named \"ap\" (did you mean \"app\"?)"},
    {"dangling_cluster_list", "[[route]]\nname = \"r\"\ncluster = \"backend\"\n",
     "t.toml:9:11: route \"r\".cluster: no cluster named \"backend\"; defined: app"},
    {"dangling_weighted_cluster", "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\", weight = 1 }, { name = \"zzz\", weight = 1 } ]\n",
     "t.toml:9:53: route \"r\".clusters[1].name: no cluster named \"zzz\"; defined: app"},
    {"dangling_listener", "[[route]]\nname = \"r\"\nlisteners = [\"web\", \"Web2\"]\ncluster = \"app\"\n",
     "t.toml:9:21: route \"r\".listeners[1]: no listener named \"Web2\" (did you mean \"web\"?)"},

    // socket addresses
    {"address_no_port", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1\"\n",
     "t.toml:9:11: listener \"b\".address: missing \":port\" (write \"ip:port\", or \"[ipv6]:port\")"},
    {"address_port_zero", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:0\"\n",
     "t.toml:9:11: listener \"b\".address: port 0 is not allowed: give a fixed port in 1..65535"},
    {"address_port_too_big", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:65536\"\n",
     "t.toml:9:11: listener \"b\".address: port 65536 is out of range 1..65535"},
    {"address_port_name", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:http\"\n",
     "t.toml:9:11: listener \"b\".address: port \"http\" is not a number in 1..65535"},
    {"address_empty_port", "[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:\"\n",
     "t.toml:9:11: listener \"b\".address: missing port number after ':'"},
    {"address_host_name", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"localhost:9002\" } ]\n",
     "t.toml:9:27: cluster \"b\".endpoints[0].address: \"localhost\" is not an IP address (names are not resolved; "
     "write e.g. \"127.0.0.1\")"},
    {"address_bad_ipv4", "[[listener]]\nname = \"b\"\naddress = \"256.1.1.1:80\"\n",
     "t.toml:9:11: listener \"b\".address: \"256.1.1.1\" is not an IPv4 address"},
    {"address_ipv6_without_brackets", "[[listener]]\nname = \"b\"\naddress = \"::1:80\"\n",
     "t.toml:9:11: listener \"b\".address: an IPv6 address needs brackets: \"[::1]:80\""},
    {"address_bad_ipv6", "[[listener]]\nname = \"b\"\naddress = \"[::g]:80\"\n",
     "t.toml:9:11: listener \"b\".address: \"::g\" is not an IPv6 address"},
    {"address_ipv6_without_port", "[[listener]]\nname = \"b\"\naddress = \"[::1]\"\n",
     "t.toml:9:11: listener \"b\".address: missing \":port\" after \"[::1]\""},
    {"address_ipv6_unclosed", "[[listener]]\nname = \"b\"\naddress = \"[::1:80\"\n",
     "t.toml:9:11: listener \"b\".address: missing ']' after the IPv6 address"},
    {"endpoint_wildcard", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"0.0.0.0:9002\" } ]\n",
     "t.toml:9:27: cluster \"b\".endpoints[0].address: 0.0.0.0:9002 is a wildcard address; an endpoint needs the "
     "address to connect to, e.g. 127.0.0.1"},
    {"endpoint_is_a_listener", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.1:8080\" } ]\n",
     "t.toml:9:27: cluster \"b\".endpoints[0].address: 127.0.0.1:8080 is the address of listener \"web\" (t.toml:3:11): "
     "requests would loop through l7fast; point the endpoint at the backend itself"},
    {"endpoint_behind_wildcard_listener", "[[listener]]\nname = \"all\"\naddress = \"0.0.0.0:8090\"\n"
     "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.2:8090\" } ]\n",
     "t.toml:12:27: cluster \"b\".endpoints[0].address: 127.0.0.2:8090 is the address of listener \"all\" (t.toml:9:11): "
     "requests would loop through l7fast; point the endpoint at the backend itself"},

    // methods
    {"method_lower_case", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = [\"GET\", \"post\"]\n",
     "t.toml:11:18: route \"r\".match.method[1]: \"post\": methods are case-sensitive and l7fast only routes "
     "upper-case ones; write \"POST\""},
    {"method_not_a_token", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = \"GET /\"\n",
     "t.toml:11:10: route \"r\".match.method: \"GET /\" is not a method token (RFC 9110: letters, digits and "
     "!#$%&'*+-.^_`|~)"},
    {"method_connect", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = \"CONNECT\"\n",
     "t.toml:11:10: route \"r\".match.method: CONNECT requests are never routed (tunnels are not supported); remove it"},
    {"method_empty_list", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = []\n",
     "t.toml:11:10: route \"r\".match.method: empty list; omit \"method\" to match any method"},
    {"method_empty_string", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nmethod = \"\"\n",
     "t.toml:11:10: route \"r\".match.method: \"\" is not a method token (RFC 9110: letters, digits and "
     "!#$%&'*+-.^_`|~)"},

    // hosts
    {"host_with_port", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"Example.com:8080\"\n",
     "t.toml:11:8: route \"r\".match.host: \"Example.com:8080\": the host is matched without its port; write "
     "\"example.com\""},
    {"host_ipv6_with_port", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"[::1]:8080\"\n",
     "t.toml:11:8: route \"r\".match.host: \"[::1]:8080\": the host is matched without its port; write \"[::1]\""},
    {"host_bare_ipv6", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"fe80::1\"\n",
     "t.toml:11:8: route \"r\".match.host: an IPv6 literal is written in brackets, as in the Host header: "
     "\"[fe80::1]\""},
    {"host_bad_ipv6", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"[fe80::x]\"\n",
     "t.toml:11:8: route \"r\".match.host: \"[fe80::x]\" is not a valid IPv6 literal"},
    {"host_wildcard", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"*.example.com\"\n",
     "t.toml:11:8: route \"r\".match.host: \"*.example.com\": wildcard hosts are not supported; give each host its "
     "own route"},
    {"host_bad_character", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"exa mple.com\"\n",
     "t.toml:11:8: route \"r\".match.host: \"exa mple.com\" is not a host name or IP literal (labels of letters, "
     "digits, '-' and '_' separated by single dots, at most 253 bytes)"},
    {"host_trailing_dot", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"example.com.\"\n",
     "t.toml:11:8: route \"r\".match.host: \"example.com.\" is not a host name or IP literal (labels of letters, "
     "digits, '-' and '_' separated by single dots, at most 253 bytes)"},
    {"host_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"\"\n",
     "t.toml:11:8: route \"r\".match.host: empty; omit \"host\" to match any host"},
    {"host_url", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nhost = \"http://example.com\"\n",
     "t.toml:11:8: route \"r\".match.host: \"http://example.com\" is a URL or has a path: write only the host name, "
     "e.g. \"example.com\""},

    // paths
    {"path_relative", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_prefix = \"api/\"\n",
     "t.toml:11:15: route \"r\".match.path_prefix: \"api/\" must start with '/'"},
    {"path_url", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"http://x/y\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"http://x/y\" is a URL: write only its path, starting with '/'"},
    {"path_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"\" must start with '/'"},
    {"path_space", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/a b\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"/a b\" contains a space: percent-encode it (e.g. %20)"},
    {"path_non_ascii", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_prefix = \"/caf\xC3\xA9\"\n",
     "t.toml:11:15: route \"r\".match.path_prefix: \"/caf\xC3\xA9\" contains byte 0xC3: percent-encode it (e.g. "
     "%20)"},
    {"path_control", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_prefix = \"/a\\tb\"\n",
     "t.toml:11:15: route \"r\".match.path_prefix: \"/a\\x09b\" contains a tab: percent-encode it (e.g. %20)"},
    {"path_dot_segment", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_prefix = \"/a/../admin\"\n",
     "t.toml:11:15: route \"r\".match.path_prefix: \"/a/../admin\" is not in normal form (requests are matched "
     "after percent-decoding of unreserved characters, merging of '/' runs and removal of dot segments): write "
     "\"/admin\""},
    {"path_escaped_unreserved", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/%61dmin\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"/%61dmin\" is not in normal form (requests are matched "
     "after percent-decoding of unreserved characters, merging of '/' runs and removal of dot segments): write "
     "\"/admin\""},
    {"path_encoded_slash", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/a%2Fb\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"/a%2Fb\": encoded slash or backslash in the request path; "
     "requests with it are rejected with 400, so it can never match"},
    {"path_query", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/search?q=1\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"/search?q=1\" contains '?': paths are matched without the "
     "query; remove everything from '?'"},
    {"path_fragment", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/doc#top\"\n",
     "t.toml:11:14: route \"r\".match.path_exact: \"/doc#top\" contains '#': clients never send a fragment"},
    {"path_exact_and_prefix", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/a\"\npath_prefix = \"/b\"\n",
     "t.toml:12:15: route \"r\".match.path_prefix: give at most one of \"path_exact\", \"path_prefix\" and "
     "\"path_regex\""},

    // header conditions
    {"header_name_not_a_token", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x debug\", present = true } ]\n",
     "t.toml:11:22: route \"r\".match.headers[0].name: \"x debug\" is not a header field name (RFC 9110 token: "
     "letters, digits and !#$%&'*+-.^_`|~)"},
    {"header_name_with_colon", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x-a:\", present = true } ]\n",
     "t.toml:11:22: route \"r\".match.headers[0].name: \"x-a:\" is not a header field name (RFC 9110 token: "
     "letters, digits and !#$%&'*+-.^_`|~)"},
    {"header_exact_and_present", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", exact = \"1\", present = true } ]\n",
     "t.toml:11:50: route \"r\".match.headers[0].present: give only one of \"exact\", \"prefix\", \"present\" and "
     "\"absent\""},
    {"header_neither", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\" } ]\n",
     "t.toml:11:13: route \"r\".match.headers[0]: needs one of \"exact\" (a value), \"prefix\" (a value), "
     "\"present = true\" or \"absent = true\""},
    {"header_present_false", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", present = false } ]\n",
     "t.toml:11:37: route \"r\".match.headers[0].present: present = false is not a condition; write absent = true to "
     "match requests without the header"},
    {"header_present_string", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", present = \"yes\" } ]\n",
     "t.toml:11:37: route \"r\".match.headers[0].present: expected a boolean (true or false), got a string"},
    {"header_value_padded", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", exact = \"1 \" } ]\n",
     "t.toml:11:35: route \"r\".match.headers[0].exact: \"1 \" has leading or trailing whitespace, which is removed "
     "from requests before comparing, so it could never match"},
    {"header_value_control", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", exact = \"a\\nb\" } ]\n",
     "t.toml:11:35: route \"r\".match.headers[0].exact: \"a\\x0Ab\" contains byte 0x0A, which no valid request carries"},
    {"headers_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = []\n",
     "t.toml:11:11: route \"r\".match.headers: empty list; omit \"headers\" to match any headers"},

    // weights and clusters
    {"endpoint_weight_negative", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\nendpoints = [ { address = \"127.0.0.1:9002\", weight = -1 } ]\n",
     "t.toml:10:54: cluster \"b\".endpoints[0].weight: -1 is out of range 0..65535"},
    {"endpoint_weight_too_big", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\nendpoints = [ { address = \"127.0.0.1:9002\", weight = 65536 } ]\n",
     "t.toml:10:54: cluster \"b\".endpoints[0].weight: 65536 is out of range 0..65535"},
    {"endpoint_weights_sum_zero", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\nendpoints = [ { address = \"127.0.0.1:9002\", weight = 0 } ]\n",
     "t.toml:10:13: cluster \"b\".endpoints: the endpoint weights sum to 0; the sum must be in 1..65535"},
    {"endpoint_weights_sum_too_big", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\n"
     "endpoints = [ { address = \"127.0.0.1:9002\", weight = 40000 }, { address = \"127.0.0.1:9003\", weight = 40000 } ]\n",
     "t.toml:10:13: cluster \"b\".endpoints: the endpoint weights sum to 80000; the sum must be in 1..65535"},
    {"endpoint_weight_round_robin", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.1:9002\", weight = 2 } ]\n",
     "t.toml:9:54: cluster \"b\".endpoints[0].weight: weights need lb = \"weighted\", \"ring_hash\" or \"maglev\" "
     "(this cluster is round_robin)"},
    {"endpoints_empty", "[[cluster]]\nname = \"b\"\nendpoints = []\n",
     "t.toml:9:13: cluster \"b\".endpoints: empty; a cluster needs at least one endpoint"},
    {"lb_unknown", "[[cluster]]\nname = \"b\"\nlb = \"least_conn\"\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:9:6: cluster \"b\".lb: \"least_conn\" is not a load-balancing policy; use \"round_robin\", "
     "\"weighted\", \"ring_hash\" or \"maglev\""},
    {"route_weight_too_big", "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\", weight = 70000 } ]\n",
     "t.toml:9:39: route \"r\".clusters[0].weight: 70000 is out of range 0..65535"},
    {"route_weights_sum_zero", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n"
     "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\", weight = 0 }, { name = \"b\", weight = 0 } ]\n",
     "t.toml:12:12: route \"r\".clusters: the cluster weights sum to 0; the sum must be in 1..65535"},
    {"route_weights_sum_too_big", "[[cluster]]\nname = \"b\"\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n"
     "[[route]]\nname = \"r\"\nclusters = [ { name = \"app\", weight = 40000 }, { name = \"b\", weight = 30000 } ]\n",
     "t.toml:12:12: route \"r\".clusters: the cluster weights sum to 70000; the sum must be in 1..65535"},
    {"route_cluster_and_clusters", "[[route]]\nname = \"r\"\ncluster = \"app\"\nclusters = [ { name = \"app\" } ]\n",
     "t.toml:10:12: route \"r\".clusters: give either \"cluster\" or \"clusters\", not both"},
    {"route_clusters_empty", "[[route]]\nname = \"r\"\nclusters = []\n",
     "t.toml:9:12: route \"r\".clusters: empty list; a route needs at least one cluster"},
    {"route_listeners_empty", "[[route]]\nname = \"r\"\nlisteners = []\ncluster = \"app\"\n",
     "t.toml:9:13: route \"r\".listeners: empty list; omit \"listeners\" to use every listener"},

    // clusters: health_check (after kBase, [cluster.health_check] belongs to cluster "app")
    {"health_check_unknown_key", "[cluster.health_check]\npth = \"/healthz\"\n",
     "t.toml:8:1: cluster \"app\".health_check.pth: unknown key (did you mean \"path\"?); allowed here: path, host, "
     "interval_ms, timeout_ms, healthy_threshold, unhealthy_threshold, expected_status"},
    {"health_check_not_a_table", "health_check = \"/healthz\"\n",
     "t.toml:7:16: cluster \"app\".health_check: expected a table, got a string"},
    {"health_check_path_relative", "[cluster.health_check]\npath = \"healthz\"\n",
     "t.toml:8:8: cluster \"app\".health_check.path: \"healthz\" must start with '/'"},
    {"health_check_path_empty", "health_check = { path = \"\" }\n",
     "t.toml:7:25: cluster \"app\".health_check.path: \"\" must start with '/'"},
    {"health_check_path_url", "[cluster.health_check]\npath = \"http://app/healthz\"\n",
     "t.toml:8:8: cluster \"app\".health_check.path: \"http://app/healthz\" is a URL: write only its path, starting "
     "with '/'"},
    {"health_check_path_space", "[cluster.health_check]\npath = \"/health z\"\n",
     "t.toml:8:8: cluster \"app\".health_check.path: \"/health z\" contains a space: percent-encode it (e.g. %20)"},
    {"health_check_path_non_ascii", "[cluster.health_check]\npath = \"/caf\xC3\xA9\"\n",
     "t.toml:8:8: cluster \"app\".health_check.path: \"/caf\xC3\xA9\" contains byte 0xC3: percent-encode it (e.g. "
     "%20)"},
    {"health_check_path_fragment", "[cluster.health_check]\npath = \"/healthz#top\"\n",
     "t.toml:8:8: cluster \"app\".health_check.path: \"/healthz#top\" contains '#': a request target has no "
     "fragment"},
    {"health_check_path_integer", "[cluster.health_check]\npath = 1\n",
     "t.toml:8:8: cluster \"app\".health_check.path: expected a string, got an integer"},
    {"health_check_host_empty", "[cluster.health_check]\nhost = \"\"\n",
     "t.toml:8:8: cluster \"app\".health_check.host: empty; omit \"host\" to send the endpoint's address"},
    {"health_check_host_space", "[cluster.health_check]\nhost = \"app internal\"\n",
     "t.toml:8:8: cluster \"app\".health_check.host: \"app internal\" contains a space: the Host field is sent as "
     "written, in visible ASCII without spaces"},
    {"health_check_host_control", "[cluster.health_check]\nhost = \"app\\r\\nx: y\"\n",
     "t.toml:8:8: cluster \"app\".health_check.host: \"app\\x0D\\x0Ax: y\" contains byte 0x0D: the Host field is "
     "sent as written, in visible ASCII without spaces"},
    {"health_check_interval_low", "[cluster.health_check]\ninterval_ms = 99\n",
     "t.toml:8:15: cluster \"app\".health_check.interval_ms: 99 is out of range 100..3600000 (milliseconds between "
     "checks, at most one hour)"},
    {"health_check_interval_high", "[cluster.health_check]\ninterval_ms = 3600001\n",
     "t.toml:8:15: cluster \"app\".health_check.interval_ms: 3600001 is out of range 100..3600000 (milliseconds "
     "between checks, at most one hour)"},
    {"health_check_timeout_low", "[cluster.health_check]\ntimeout_ms = 9\n",
     "t.toml:8:14: cluster \"app\".health_check.timeout_ms: 9 is out of range 10..600000 (milliseconds to wait for "
     "the status line, at most ten minutes)"},
    {"health_check_timeout_high", "[cluster.health_check]\ninterval_ms = 3600000\ntimeout_ms = 600001\n",
     "t.toml:9:14: cluster \"app\".health_check.timeout_ms: 600001 is out of range 10..600000 (milliseconds to wait "
     "for the status line, at most ten minutes)"},
    {"health_check_timeout_not_below_interval", "[cluster.health_check]\ninterval_ms = 2000\ntimeout_ms = 2000\n",
     "t.toml:9:14: cluster \"app\".health_check.timeout_ms: timeout_ms (2000) must be less than interval_ms (2000)"},
    {"health_check_timeout_above_default_interval", "[cluster.health_check]\ntimeout_ms = 6000\n",
     "t.toml:8:14: cluster \"app\".health_check.timeout_ms: timeout_ms (6000) must be less than interval_ms (5000 by "
     "default)"},
    {"health_check_interval_below_default_timeout", "[cluster.health_check]\ninterval_ms = 1000\n",
     "t.toml:8:15: cluster \"app\".health_check.interval_ms: timeout_ms (1000 by default) must be less than "
     "interval_ms (1000)"},
    {"health_check_healthy_threshold_zero", "[cluster.health_check]\nhealthy_threshold = 0\n",
     "t.toml:8:21: cluster \"app\".health_check.healthy_threshold: 0 is out of range 1..100 (consecutive passes "
     "that bring an endpoint back)"},
    {"health_check_unhealthy_threshold_high", "[cluster.health_check]\nunhealthy_threshold = 101\n",
     "t.toml:8:23: cluster \"app\".health_check.unhealthy_threshold: 101 is out of range 1..100 (consecutive "
     "failures that take an endpoint out)"},
    {"health_check_status_out_of_range", "[cluster.health_check]\nexpected_status = 600\n",
     "t.toml:8:19: cluster \"app\".health_check.expected_status: 600 is out of range 100..599 (an HTTP status "
     "code)"},
    {"health_check_status_element_out_of_range", "[cluster.health_check]\nexpected_status = [200, 99]\n",
     "t.toml:8:25: cluster \"app\".health_check.expected_status[1]: 99 is out of range 100..599 (an HTTP status "
     "code)"},
    {"health_check_status_empty", "[cluster.health_check]\nexpected_status = []\n",
     "t.toml:8:19: cluster \"app\".health_check.expected_status: empty list; omit \"expected_status\" to accept "
     "any 2xx or 3xx status"},
    {"health_check_status_twice", "[cluster.health_check]\nexpected_status = [200, 204, 200]\n",
     "t.toml:8:30: cluster \"app\".health_check.expected_status[2]: 200 is listed twice"},
    {"health_check_status_string", "[cluster.health_check]\nexpected_status = \"200\"\n",
     "t.toml:8:19: cluster \"app\".health_check.expected_status: expected an integer or an array of integers, got "
     "a string"},
    {"health_check_status_element_string", "[cluster.health_check]\nexpected_status = [200, \"204\"]\n",
     "t.toml:8:25: cluster \"app\".health_check.expected_status[1]: expected an integer, got a string"},

    // clusters: outlier_detection
    {"outlier_unknown_key", "[cluster.outlier_detection]\nmax_ejection_percentage = 20\n",
     "t.toml:8:1: cluster \"app\".outlier_detection.max_ejection_percentage: unknown key (did you mean "
     "\"max_ejection_percent\"?); allowed here: consecutive_5xx, consecutive_connect_failures, base_ejection_ms, "
     "max_ejection_ms, max_ejection_percent"},
    {"outlier_not_a_table", "outlier_detection = true\n",
     "t.toml:7:21: cluster \"app\".outlier_detection: expected a table, got a boolean"},
    {"outlier_5xx_high", "[cluster.outlier_detection]\nconsecutive_5xx = 1001\n",
     "t.toml:8:19: cluster \"app\".outlier_detection.consecutive_5xx: 1001 is out of range 0..1000 (consecutive "
     "5xx responses that eject an endpoint; 0 turns this trigger off)"},
    {"outlier_connect_failures_negative", "[cluster.outlier_detection]\nconsecutive_connect_failures = -1\n",
     "t.toml:8:32: cluster \"app\".outlier_detection.consecutive_connect_failures: -1 is out of range 0..1000 "
     "(consecutive failed connection attempts that eject an endpoint; 0 turns this trigger off)"},
    {"outlier_both_triggers_off", "[cluster.outlier_detection]\nconsecutive_5xx = 0\nconsecutive_connect_failures = 0\n",
     "t.toml:9:32: cluster \"app\".outlier_detection.consecutive_connect_failures: consecutive_5xx and "
     "consecutive_connect_failures are both 0: both triggers are off, so nothing is ever ejected; remove "
     "outlier_detection instead"},
    {"outlier_base_ejection_low", "[cluster.outlier_detection]\nbase_ejection_ms = 99\n",
     "t.toml:8:20: cluster \"app\".outlier_detection.base_ejection_ms: 99 is out of range 100..86400000 "
     "(milliseconds, at most one day)"},
    {"outlier_max_ejection_high", "[cluster.outlier_detection]\nmax_ejection_ms = 86400001\n",
     "t.toml:8:19: cluster \"app\".outlier_detection.max_ejection_ms: 86400001 is out of range 100..86400000 "
     "(milliseconds, at most one day)"},
    {"outlier_max_below_base", "[cluster.outlier_detection]\nbase_ejection_ms = 60000\nmax_ejection_ms = 30000\n",
     "t.toml:9:19: cluster \"app\".outlier_detection.max_ejection_ms: max_ejection_ms (30000) is less than "
     "base_ejection_ms (60000)"},
    {"outlier_default_max_below_base", "[cluster.outlier_detection]\nbase_ejection_ms = 400000\n",
     "t.toml:8:20: cluster \"app\".outlier_detection.base_ejection_ms: max_ejection_ms (300000 by default) is less "
     "than base_ejection_ms (400000)"},
    {"outlier_percent_zero", "[cluster.outlier_detection]\nmax_ejection_percent = 0\n",
     "t.toml:8:24: cluster \"app\".outlier_detection.max_ejection_percent: 0 is out of range 1..100 (percent of "
     "the cluster's endpoints that may be ejected at once)"},
    {"outlier_percent_high", "outlier_detection = { max_ejection_percent = 101 }\n",
     "t.toml:7:46: cluster \"app\".outlier_detection.max_ejection_percent: 101 is out of range 1..100 (percent of "
     "the cluster's endpoints that may be ejected at once)"},

    // [daemon]
    {"pool_max_zero", "[daemon]\npool_max = 0\n",
     "t.toml:8:12: daemon.pool_max: 0 is out of range 1..1024 (pooled kernel-path connections per endpoint; the data "
     "plane's pools hold at most 1024)"},
    {"pool_max_above_limit", "[daemon]\npool_max = 1025\n",
     "t.toml:8:12: daemon.pool_max: 1025 is out of range 1..1024 (pooled kernel-path connections per endpoint; the "
     "data plane's pools hold at most 1024)"},
    {"pool_min_idle_above_max", "[daemon]\npool_max = 4\npool_min_idle = 5\n",
     "t.toml:9:17: daemon.pool_min_idle: 5 is more than pool_max (4)"},
    {"ingress_budget_small", "[daemon]\ningress_budget = 1000\n",
     "t.toml:8:18: daemon.ingress_budget: 1000 is out of range 1024..4294967295 (bytes; smaller budgets would send "
     "most responses over TCP)"},
    {"timeout_zero", "[daemon]\nrequest_timeout_ms = 0\n",
     "t.toml:8:22: daemon.request_timeout_ms: 0 is out of range 1..86400000 (milliseconds, at most one day)"},
    {"timeout_negative", "[daemon]\nidle_timeout_ms = -5\n",
     "t.toml:8:19: daemon.idle_timeout_ms: -5 is out of range 1..86400000 (milliseconds, at most one day)"},
    {"log_level_unknown", "[daemon]\nlog_level = \"verbose\"\n",
     "t.toml:8:13: daemon.log_level: \"verbose\" is not a log level; use \"error\", \"warning\", \"notice\", \"info\" "
     "or \"debug\""},
    {"access_log_format_unknown", "[daemon]\naccess_log_format = \"jsn\"\n",
     "t.toml:8:21: daemon.access_log_format: \"jsn\" is not an access-log format; use \"text\" or \"json\" "
     "(did you mean \"json\"?)"},
    {"cgroup_relative", "[daemon]\ncgroup = \"sys/fs/cgroup\"\n",
     "t.toml:8:10: daemon.cgroup: \"sys/fs/cgroup\" must be an absolute path"},
    {"bpffs_control_character", "[daemon]\nbpffs = \"/sys/fs/bpf/\\u0001\"\n",
     "t.toml:8:9: daemon.bpffs: \"/sys/fs/bpf/\\x01\" contains a control character"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Cases, PolicyLoaderError, testing::ValuesIn(kErrorCases),
                         [](const testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });
