#include "proxy/UpstreamHealth.hpp"

#include <algorithm>
#include <atomic>
#include <random>

#include "common/Log.hpp"
#include "proxy/Deadline.hpp"
#include "proxy/ProxyServer.hpp"
#include "proxy/UpstreamPool.hpp"

namespace l7fast::proxy {
namespace {

std::atomic_ref<uint32_t> word(uint32_t& w) { return std::atomic_ref<uint32_t>(w); }

std::string ms_text(std::chrono::milliseconds d)
{
    if (d.count() % 1000 == 0)
        return std::to_string(d.count() / 1000) + " s";
    return std::to_string(d.count()) + " ms";
}

// "HTTP/1.x NNN" at the start of `head`: the status, or 0.
int status_of(const std::string& head)
{
    if (head.size() < 13 || head.compare(0, 7, "HTTP/1.") != 0 || (head[7] != '0' && head[7] != '1') ||
        head[8] != ' ')
        return 0;
    int status = 0;
    for (size_t i = 9; i < 12; i++) {
        if (head[i] < '0' || head[i] > '9')
            return 0;
        status = status * 10 + (head[i] - '0');
    }
    if (head[12] != ' ' && head[12] != '\r')
        return 0;
    return status >= 100 && status <= 599 ? status : 0;
}

}  // namespace

std::string EndpointHealth::state() const
{
    if (in())
        return "up";
    std::string s;
    for (auto [on, name] : {std::pair{drained, "drained"}, {unhealthy, "unhealthy"}, {ejected, "ejected"}})
        if (on)
            s += (s.empty() ? "" : "+") + std::string(name);
    return s;
}

// One cluster's active health check of one address.
struct UpstreamHealth::Checker {
    Checker(asio::io_context& io) : timer(io) {}
    uint32_t pool = 0;
    std::string cluster;
    policy::HealthCheck settings;
    tcp::endpoint endpoint;
    std::string request;
    std::chrono::milliseconds first_delay{0};
    uint32_t passes = 0, failures = 0;  // in a row
    bool stopped = false;
    asio::steady_timer timer;
    tcp::socket* socket = nullptr;  // while a probe runs
};

UpstreamHealth::UpstreamHealth(asio::io_context& io, UpstreamPool& pool) : io_(io), pool_(pool) {}

UpstreamHealth::~UpstreamHealth() { stop(); }

void UpstreamHealth::stop()
{
    for (auto& c : checkers_) {
        c->stopped = true;
        c->timer.cancel();
        if (c->socket) {
            error_code ig;
            c->socket->cancel(ig);
        }
    }
    checkers_.clear();
}

l7_pool* UpstreamHealth::words(uint32_t pool) const { return pool_.shared_pool(pool); }

void UpstreamHealth::apply(const PolicyRuntime& rt)
{
    const policy::Policy& pol = rt.policy();
    std::map<uint32_t, Address> next;
    cluster_pools_.clear();
    for (size_t ci = 0; ci < pol.clusters.size() && ci < rt.endpoint_pool.size(); ci++) {
        const policy::Cluster& c = pol.clusters[ci];
        auto& pools = cluster_pools_[c.name];
        for (size_t e = 0; e < c.endpoints.size() && e < rt.endpoint_pool[ci].size(); e++) {
            const uint32_t pool = rt.endpoint_pool[ci][e];
            pools.push_back(pool);
            auto [it, fresh] = next.try_emplace(pool);
            Address& a = it->second;
            if (fresh) {
                if (auto old = addresses_.find(pool);
                    old != addresses_.end() && old->second.address == c.endpoints[e].address) {
                    // drain, ejection and the verdicts of checks that stay
                    a = std::move(old->second);
                    a.outlier.reset();
                }
                a.address = c.endpoints[e].address;
            }
            if (c.outlier_detection) {
                if (!a.outlier)
                    a.outlier = Outlier{*c.outlier_detection, {}};
                a.outlier->clusters.push_back(c.name);
            }
            if (c.health_check)
                a.failing.try_emplace(c.name, false);
        }
    }
    // failing verdicts of clusters that no longer list the address
    for (auto& [pool, a] : next)
        std::erase_if(a.failing, [&](const auto& kv) {
            const policy::Cluster* pc = pol.find_cluster(kv.first);
            if (!pc || !pc->health_check)
                return true;
            return std::none_of(pc->endpoints.begin(), pc->endpoints.end(),
                                [&](const policy::Endpoint& ep) { return ep.address == a.address; });
        });
    // addresses that left the policy: their words are someone else's next
    for (auto& [pool, a] : addresses_) {
        if (next.count(pool))
            continue;
        if (l7_pool* w = words(pool)) {
            word(w->down).store(0);
            word(w->eject_5xx).store(0);
        }
    }
    addresses_ = std::move(next);
    for (auto& [pool, a] : addresses_)
        publish(pool);

    stop();
    std::mt19937 rng{std::random_device{}()};
    for (size_t ci = 0; ci < pol.clusters.size() && ci < rt.endpoint_pool.size(); ci++) {
        const policy::Cluster& c = pol.clusters[ci];
        if (!c.health_check)
            continue;
        for (size_t e = 0; e < c.endpoints.size() && e < rt.endpoint_pool[ci].size(); e++) {
            auto ck = std::make_shared<Checker>(io_);
            ck->pool = rt.endpoint_pool[ci][e];
            ck->cluster = c.name;
            ck->settings = *c.health_check;
            ck->endpoint = to_endpoint(c.endpoints[e].address);
            const std::string host = c.health_check->host.empty() ? c.endpoints[e].address.str() : c.health_check->host;
            ck->request = "GET " + c.health_check->path + " HTTP/1.1\r\nHost: " + host +
                          "\r\nUser-Agent: l7fast-health-check\r\nConnection: close\r\n\r\n";
            // the first round soon, spread so that a large cluster's checks do not go out at once
            const auto spread = std::min<int64_t>(c.health_check->interval.count(), 1000);
            ck->first_delay = std::chrono::milliseconds(rng() % static_cast<uint64_t>(spread));
            checkers_.push_back(ck);
            asio::co_spawn(io_, check_loop(ck), asio::detached);
        }
    }
}

bool UpstreamHealth::available(uint32_t pool) const
{
    auto it = addresses_.find(pool);
    if (it == addresses_.end())
        return true;
    const Address& a = it->second;
    if (a.drained || a.ejected_until)
        return false;
    for (const auto& [cluster, failing] : a.failing)
        if (failing)
            return false;
    return true;
}

void UpstreamHealth::publish(uint32_t pool)
{
    auto it = addresses_.find(pool);
    l7_pool* w = words(pool);
    if (it == addresses_.end() || !w)
        return;
    const Address& a = it->second;
    uint32_t down = 0;
    if (a.drained)
        down |= L7_DOWN_DRAINED;
    if (a.ejected_until)
        down |= L7_DOWN_EJECTED;
    for (const auto& [cluster, failing] : a.failing)
        if (failing)
            down |= L7_DOWN_UNHEALTHY;
    word(w->down).store(down);
    word(w->eject_5xx).store(a.outlier ? a.outlier->settings.consecutive_5xx : 0);
}

bool UpstreamHealth::ejection_allowed(uint32_t pool) const
{
    const Address& a = addresses_.at(pool);
    for (const std::string& name : a.outlier->clusters) {
        auto cp = cluster_pools_.find(name);
        if (cp == cluster_pools_.end())
            continue;
        size_t ejected = 0;
        for (uint32_t p : cp->second)
            if (auto it = addresses_.find(p); it != addresses_.end() && it->second.ejected_until)
                ejected++;
        const size_t n = cp->second.size();
        const size_t allowed = std::max<size_t>(1, n * a.outlier->settings.max_ejection_percent / 100);
        if (ejected >= allowed)
            return false;
    }
    return true;
}

void UpstreamHealth::eject(uint32_t pool, const char* trigger)
{
    auto it = addresses_.find(pool);
    if (it == addresses_.end() || !it->second.outlier)
        return;
    Address& a = it->second;
    a.connect_failures = 0;
    if (l7_pool* w = words(pool))
        word(w->streak_5xx).store(0);
    if (a.ejected_until)
        return;
    const policy::OutlierDetection& s = a.outlier->settings;
    if (!ejection_allowed(pool)) {
        log::notice("upstream ", a.address.str(), ": not ejected after ", trigger,
                    ": cluster ", a.outlier->clusters.front(), " has max_ejection_percent = ",
                    s.max_ejection_percent, " of its endpoints ejected already");
        return;
    }
    const auto now = Clock::now();
    // an address that stayed in for as long as the longest ejection starts over
    if (a.ejections && now - a.last_ejection_end > s.max_ejection)
        a.ejections = 0;
    a.ejections++;
    const auto base = s.base_ejection.count();
    const auto length = std::chrono::milliseconds(
        std::min<int64_t>(s.max_ejection.count(), base * static_cast<int64_t>(std::min<uint32_t>(a.ejections, 1u << 20))));
    a.ejected_until = now + length;
    if (std::string(trigger) == "consecutive_5xx")
        a.ejections_5xx++;
    else
        a.ejections_connect++;
    publish(pool);
    log::warning("upstream ", a.address.str(), " ejected for ", ms_text(length), " (ejection ", a.ejections,
                 "): ",
                 std::string(trigger) == "consecutive_5xx"
                     ? std::to_string(s.consecutive_5xx) + " responses in a row were 5xx"
                     : std::to_string(s.consecutive_connect_failures) + " connection attempts in a row failed",
                 " (outlier_detection of cluster ", a.outlier->clusters.front(), ")");
}

void UpstreamHealth::on_response(uint32_t pool, int status)
{
    auto it = addresses_.find(pool);
    if (it == addresses_.end() || !it->second.outlier || !it->second.outlier->settings.consecutive_5xx)
        return;
    l7_pool* w = words(pool);
    if (!w)
        return;
    if (status < 500 || status > 599) {
        if (word(w->streak_5xx).load())
            word(w->streak_5xx).store(0);
        return;
    }
    // the kernel adds to the same word: whoever brings it to the threshold ejects
    if (word(w->streak_5xx).fetch_add(1) + 1 == it->second.outlier->settings.consecutive_5xx)
        eject(pool, "consecutive_5xx");
}

void UpstreamHealth::on_kernel_streak(uint32_t pool) { eject(pool, "consecutive_5xx"); }

void UpstreamHealth::on_connect(uint32_t pool, bool ok)
{
    auto it = addresses_.find(pool);
    if (it == addresses_.end())
        return;
    Address& a = it->second;
    if (ok) {
        a.connect_failures = 0;
        return;
    }
    if (!a.outlier || !a.outlier->settings.consecutive_connect_failures)
        return;
    if (++a.connect_failures >= a.outlier->settings.consecutive_connect_failures)
        eject(pool, "connect_failures");
}

void UpstreamHealth::tick()
{
    const auto now = Clock::now();
    for (auto& [pool, a] : addresses_) {
        if (!a.ejected_until || *a.ejected_until > now)
            continue;
        a.ejected_until.reset();
        a.last_ejection_end = now;
        a.connect_failures = 0;
        if (l7_pool* w = words(pool))
            word(w->streak_5xx).store(0);
        publish(pool);
        log::notice("upstream ", a.address.str(), ": ejection over, back in",
                    available(pool) ? "" : " once it is no longer drained or unhealthy");
    }
}

std::optional<bool> UpstreamHealth::set_drained(const policy::SocketAddress& address, bool drained)
{
    for (auto& [pool, a] : addresses_) {
        if (a.address != address)
            continue;
        if (a.drained == drained)
            return false;
        a.drained = drained;
        publish(pool);
        log::notice("upstream ", address.str(), drained ? ": drained (l7fastctl drain); no new requests"
                                                        : ": undrained (l7fastctl undrain)",
                    !drained && !available(pool) ? ", but still out (unhealthy or ejected)" : "");
        return true;
    }
    return std::nullopt;
}

std::vector<EndpointHealth> UpstreamHealth::endpoints() const
{
    std::vector<EndpointHealth> out;
    const auto now = Clock::now();
    for (const auto& [pool, a] : addresses_) {
        EndpointHealth h;
        h.address = a.address;
        h.pool = pool;
        h.drained = a.drained;
        for (const auto& [cluster, failing] : a.failing)
            h.unhealthy = h.unhealthy || failing;
        h.checked = !a.failing.empty();
        h.ejected = a.ejected_until.has_value();
        if (a.ejected_until && *a.ejected_until > now)
            h.ejected_for = std::chrono::ceil<std::chrono::milliseconds>(*a.ejected_until - now);
        h.ejections = a.ejections;
        h.checks_passed = a.checks_passed;
        h.checks_failed = a.checks_failed;
        h.last_check = a.last_check;
        h.ejections_5xx = a.ejections_5xx;
        h.ejections_connect = a.ejections_connect;
        out.push_back(std::move(h));
    }
    return out;
}

void UpstreamHealth::record_check(Checker& c, bool pass, const std::string& what)
{
    auto it = addresses_.find(c.pool);
    if (it == addresses_.end())
        return;
    Address& a = it->second;
    (pass ? a.checks_passed : a.checks_failed)++;
    a.last_check = what;
    bool& failing = a.failing[c.cluster];
    if (pass) {
        c.failures = 0;
        c.passes++;
        if (failing && c.passes >= c.settings.healthy_threshold) {
            failing = false;
            publish(c.pool);
            log::notice("upstream ", a.address.str(), ": healthy again (", c.passes,
                        " health checks of cluster ", c.cluster, " passed in a row: ", what, ")");
        }
        return;
    }
    c.passes = 0;
    c.failures++;
    if (!failing && c.failures >= c.settings.unhealthy_threshold) {
        failing = true;
        publish(c.pool);
        log::warning("upstream ", a.address.str(), ": unhealthy, no new requests (", c.failures,
                     " health checks of cluster ", c.cluster, " failed in a row: ", what, ")");
    } else {
        log::debug("upstream ", a.address.str(), ": health check of cluster ", c.cluster, " failed: ", what);
    }
}

awaitable<void> UpstreamHealth::check_loop(std::shared_ptr<Checker> c)
{
    std::chrono::milliseconds delay = c->first_delay;
    for (;;) {
        c->timer.expires_after(delay);
        error_code ec;
        co_await c->timer.async_wait(asio::redirect_error(use_awaitable, ec));
        if (c->stopped)
            co_return;
        int status = 0;
        std::string what = co_await probe(c, status);
        // `this` may be gone once stopped: nothing after this line touches it before the test
        if (c->stopped)
            co_return;
        record_check(*c, status != 0 && c->settings.passes(status), what);
        delay = c->settings.interval;
    }
}

awaitable<std::string> UpstreamHealth::probe(std::shared_ptr<Checker> c, int& status)
{
    status = 0;
    tcp::socket sock(io_);
    Deadline deadline(io_);
    deadline.arm(c->settings.timeout, {&sock});
    c->socket = &sock;
    error_code ec;
    std::string what;
    std::string head;
    sock.open(c->endpoint.protocol(), ec);
    if (!ec)
        co_await sock.async_connect(c->endpoint, asio::redirect_error(use_awaitable, ec));
    if (ec) {
        what = "connect: " + ec.message();
    } else {
        co_await asio::async_write(sock, asio::buffer(c->request), asio::redirect_error(use_awaitable, ec));
        // the status line is enough; at most 1 KiB of it
        char buf[512];
        while (!ec && head.find("\r\n") == std::string::npos && head.size() < 1024) {
            size_t n = co_await sock.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
            head.append(buf, n);
        }
    }
    deadline.disarm();
    c->socket = nullptr;
    error_code ig;
    sock.close(ig);
    if (deadline.fired())
        co_return "no status line within " + ms_text(c->settings.timeout);
    if (!what.empty())
        co_return what;
    status = status_of(head);
    if (status)
        co_return "status " + std::to_string(status);
    if (head.empty())
        co_return ec ? "no response: " + ec.message() : "no response";
    co_return "not an HTTP/1.x status line";
}

}  // namespace l7fast::proxy
