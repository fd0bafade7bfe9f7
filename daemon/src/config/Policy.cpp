#include "config/Policy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "config/Text.hpp"

namespace l7fast::policy {

std::string SourceLocation::str() const
{
    return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string SocketAddress::str() const
{
    char text[INET6_ADDRSTRLEN] = {};
    if (family == AF_INET) {
        inet_ntop(AF_INET, ip.data(), text, sizeof(text));
        return std::string(text) + ":" + std::to_string(port);
    }
    if (family == AF_INET6) {
        inet_ntop(AF_INET6, ip.data(), text, sizeof(text));
        return "[" + std::string(text) + "]:" + std::to_string(port);
    }
    return "(no address)";
}

bool SocketAddress::is_wildcard() const
{
    const size_t n = family == AF_INET ? 4 : 16;
    return std::all_of(ip.begin(), ip.begin() + n, [](uint8_t b) { return b == 0; });
}

namespace {

using text::quote;

// "1".."65535", digits only: a sign, spaces or a service name would be read
// differently by every tool an operator might compare with.
std::optional<uint16_t> parse_port(const std::string& digits, std::string* why)
{
    if (digits.empty()) {
        *why = "missing port number after ':'";
        return std::nullopt;
    }
    if (digits.size() > 5 || !std::all_of(digits.begin(), digits.end(),
                                          [](char c) { return c >= '0' && c <= '9'; })) {
        *why = "port " + quote(digits) + " is not a number in 1..65535";
        return std::nullopt;
    }
    const unsigned long value = std::stoul(digits);
    if (value == 0) {
        *why = "port 0 is not allowed: give a fixed port in 1..65535";
        return std::nullopt;
    }
    if (value > 65535) {
        *why = "port " + std::to_string(value) + " is out of range 1..65535";
        return std::nullopt;
    }
    return static_cast<uint16_t>(value);
}

}  // namespace

std::optional<SocketAddress> SocketAddress::parse(const std::string& text, std::string* why)
{
    std::string scratch;
    if (!why)
        why = &scratch;
    SocketAddress a;
    std::string host;
    std::string port;

    if (!text.empty() && text.front() == '[') {
        const size_t close = text.find(']');
        if (close == std::string::npos) {
            *why = "missing ']' after the IPv6 address";
            return std::nullopt;
        }
        host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':') {
            *why = "missing \":port\" after " + quote("[" + host + "]");
            return std::nullopt;
        }
        port = text.substr(close + 2);
        if (inet_pton(AF_INET6, host.c_str(), a.ip.data()) != 1) {
            *why = quote(host) + " is not an IPv6 address";
            return std::nullopt;
        }
        a.family = AF_INET6;
    } else {
        const size_t colon = text.rfind(':');
        if (colon == std::string::npos) {
            *why = "missing \":port\" (write \"ip:port\", or \"[ipv6]:port\")";
            return std::nullopt;
        }
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string::npos) {
            *why = "an IPv6 address needs brackets: " + quote("[" + host + "]:" + port);
            return std::nullopt;
        }
        if (inet_pton(AF_INET, host.c_str(), a.ip.data()) != 1) {
            const bool looks_like_name = std::any_of(host.begin(), host.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            });
            *why = looks_like_name
                       ? quote(host) + " is not an IP address (names are not resolved; write e.g. \"127.0.0.1\")"
                       : quote(host) + " is not an IPv4 address";
            return std::nullopt;
        }
        a.family = AF_INET;
    }
    const auto p = parse_port(port, why);
    if (!p)
        return std::nullopt;
    a.port = *p;
    return a;
}

namespace {

bool is_v4_mapped(const uint8_t* ip)
{
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(ip, kMapped, sizeof(kMapped)) == 0;
}

// Whether the first `bits` bits of a and b are equal.
bool same_prefix(const uint8_t* a, const uint8_t* b, unsigned bits)
{
    const unsigned whole = bits / 8;
    if (std::memcmp(a, b, whole) != 0)
        return false;
    const unsigned rest = bits % 8;
    if (rest == 0)
        return true;
    const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

std::string Cidr::str() const
{
    char text[INET6_ADDRSTRLEN] = {};
    if (family != AF_INET && family != AF_INET6)
        return "(no prefix)";
    inet_ntop(family, ip.data(), text, sizeof(text));
    return std::string(text) + "/" + std::to_string(prefix_len);
}

bool Cidr::contains(int client_family, const uint8_t* client_ip) const
{
    if (!client_ip)
        return false;
    if (client_family == AF_INET6 && is_v4_mapped(client_ip)) {
        client_family = AF_INET;
        client_ip += 12;
    }
    if (client_family != family || (family != AF_INET && family != AF_INET6))
        return false;
    return same_prefix(client_ip, ip.data(), prefix_len);
}

std::optional<Cidr> Cidr::parse(const std::string& text, std::string* why)
{
    std::string scratch;
    if (!why)
        why = &scratch;
    const size_t slash = text.find('/');
    const std::string host = text.substr(0, slash);
    Cidr c;
    if (host.find(':') != std::string::npos) {
        if (inet_pton(AF_INET6, host.c_str(), c.ip.data()) != 1) {
            *why = quote(host) + " is not an IPv6 address";
            return std::nullopt;
        }
        c.family = AF_INET6;
    } else if (inet_pton(AF_INET, host.c_str(), c.ip.data()) == 1) {
        c.family = AF_INET;
    } else {
        *why = quote(host) + " is not an IPv4 or IPv6 address (write e.g. \"10.0.0.0/8\" or \"fd00::/8\")";
        return std::nullopt;
    }
    const unsigned max_len = c.family == AF_INET ? 32 : 128;
    unsigned len = max_len;
    if (slash != std::string::npos) {
        const std::string digits = text.substr(slash + 1);
        const bool numeric = !digits.empty() && digits.size() <= 3 &&
                             std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        if (!numeric || std::stoul(digits) > max_len) {
            *why = "prefix length " + quote(digits) + " is not a number in 0.." + std::to_string(max_len);
            return std::nullopt;
        }
        len = static_cast<unsigned>(std::stoul(digits));
    }
    c.prefix_len = static_cast<uint8_t>(len);
    if (c.family == AF_INET6 && is_v4_mapped(c.ip.data()) && len >= 96) {
        *why = quote(text) + " is an IPv4-mapped prefix: clients' IPv4-mapped addresses are compared as IPv4, "
                             "so write the IPv4 prefix";
        return std::nullopt;
    }
    Cidr network = c;
    const unsigned n = c.family == AF_INET ? 4 : 16;
    for (unsigned i = 0; i < n; i++) {
        const unsigned bits_here = len >= (i + 1) * 8 ? 8 : (len > i * 8 ? len - i * 8 : 0);
        const auto mask = static_cast<uint8_t>(bits_here == 0 ? 0 : 0xff << (8 - bits_here));
        network.ip[i] = static_cast<uint8_t>(c.ip[i] & mask);
    }
    if (network.ip != c.ip) {
        *why = quote(text) + " has bits set after the first " + std::to_string(len) + "; write " +
               quote(network.str());
        return std::nullopt;
    }
    return c;
}

const JwtProvider* Policy::find_jwt_provider(const std::string& name) const
{
    for (const JwtProvider& j : jwt_providers)
        if (j.name == name)
            return &j;
    return nullptr;
}

const Cluster* Policy::find_cluster(const std::string& name) const
{
    for (const Cluster& c : clusters)
        if (c.name == name)
            return &c;
    return nullptr;
}

const Listener* Policy::find_listener(const std::string& name) const
{
    for (const Listener& l : listeners)
        if (l.name == name)
            return &l;
    return nullptr;
}

bool HealthCheck::passes(int status) const
{
    if (expected_status.empty())
        return status >= 200 && status <= 399;
    for (uint16_t s : expected_status)
        if (s == status)
            return true;
    return false;
}

const char* lb_name(LbPolicy lb)
{
    switch (lb) {
    case LbPolicy::RoundRobin: return "round_robin";
    case LbPolicy::Weighted: return "weighted";
    case LbPolicy::RingHash: return "ring_hash";
    case LbPolicy::Maglev: return "maglev";
    }
    return "?";
}

std::vector<ConditionRef> conditions_of(const RouteMatch& m)
{
    using K = ConditionRef::Kind;
    std::vector<ConditionRef> out;
    if (!m.methods.empty())
        out.push_back({K::Method, 0});
    if (m.host)
        out.push_back({K::Host, 0});
    if (m.path_kind != PathMatch::Any)
        out.push_back({K::Path, 0});
    for (size_t i = 0; i < m.headers.size(); i++)
        out.push_back({K::Header, i});
    for (size_t i = 0; i < m.query.size(); i++)
        out.push_back({K::Query, i});
    if (!m.sources.empty())
        out.push_back({K::Source, 0});
    for (size_t i = 0; i < m.claims.size(); i++)
        out.push_back({K::Claim, i});
    return out;
}

}  // namespace l7fast::policy
