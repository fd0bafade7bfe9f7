// The policy loader's value checks (LoaderChecks.hpp).
#include "loader/LoaderChecks.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "loader/LoaderLimits.hpp"
#include "semantics/PathNormalize.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::is_token;
using text::lower;
using text::quote;

namespace {

// Framing and hop-by-hop fields: l7fast writes them itself (or they belong to
// one connection), so no mutation, forwarded claim or direct response may.
constexpr std::array<std::string_view, 9> kReservedFields{
    "host", "content-length", "transfer-encoding", "connection", "keep-alive",
    "proxy-connection", "te", "trailer", "upgrade"};

bool is_hostname(std::string_view s)
{
    if (s.empty() || s.size() > kMaxHostLength)
        return false;
    size_t start = 0;
    while (true) {
        const size_t dot = s.find('.', start);
        const std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
        if (label.empty() || label.size() > kMaxLabelLength || label.front() == '-' || label.back() == '-')
            return false;
        for (char c : label)
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
                return false;
        if (dot == std::string_view::npos)
            return true;
        start = dot + 1;
    }
}

}  // namespace

std::string byte_text(unsigned char c)
{
    char hex[40];
    if (c == ' ')
        return "a space";
    if (c == '\t')
        return "a tab";
    std::snprintf(hex, sizeof(hex), "byte 0x%02X", c);
    return hex;
}

std::optional<std::string> check_name(std::string_view s)
{
    const bool ok = !s.empty() && s.size() <= kMaxNameLength &&
                    std::all_of(s.begin(), s.end(), [](char c) {
                        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                               (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
                    });
    if (ok)
        return std::nullopt;
    return quote(s) + " is not a valid name: use 1.." + std::to_string(kMaxNameLength) +
           " letters, digits, '.', '_' or '-'";
}

std::optional<std::string> normalize_host(std::string_view written, std::string* why)
{
    const std::string host = lower(written);
    if (host.empty()) {
        *why = "empty; omit \"host\" to match any host";
        return std::nullopt;
    }
    if (host.front() == '[') {
        const size_t close = host.find(']');
        if (close == std::string::npos) {
            *why = quote(written) + " is missing the closing ']'";
            return std::nullopt;
        }
        if (close + 1 != host.size()) {
            *why = quote(written) + ": the host is matched without its port; write " +
                   quote(host.substr(0, close + 1));
            return std::nullopt;
        }
        in6_addr a6{};
        if (inet_pton(AF_INET6, host.substr(1, close - 1).c_str(), &a6) != 1) {
            *why = quote(written) + " is not a valid IPv6 literal";
            return std::nullopt;
        }
        return host;
    }
    if (host.find('/') != std::string::npos) {
        *why = quote(written) + " is a URL or has a path: write only the host name, e.g. \"example.com\"";
        return std::nullopt;
    }
    if (host.find('*') != std::string::npos) {
        *why = quote(written) + ": wildcard hosts are not supported; give each host its own route";
        return std::nullopt;
    }
    const size_t colon = host.find(':');
    if (colon != std::string::npos) {
        in6_addr a6{};
        if (inet_pton(AF_INET6, host.c_str(), &a6) == 1)
            *why = "an IPv6 literal is written in brackets, as in the Host header: " +
                   quote("[" + host + "]");
        else
            *why = quote(written) + ": the host is matched without its port; write " +
                   quote(host.substr(0, colon));
        return std::nullopt;
    }
    if (!is_hostname(host)) {
        *why = quote(written) +
               " is not a host name or IP literal (labels of letters, digits, '-' and '_' "
               "separated by single dots, at most 253 bytes)";
        return std::nullopt;
    }
    return host;
}

std::optional<std::string> check_path(std::string_view p)
{
    if (p.empty() || p.front() != '/') {
        if (p.find("://") != std::string_view::npos)
            return quote(p) + " is a URL: write only its path, starting with '/'";
        return quote(p) + " must start with '/'";
    }
    for (char ch : p) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '?')
            return quote(p) + " contains '?': paths are matched without the query; remove "
                               "everything from '?'";
        if (c == '#')
            return quote(p) + " contains '#': clients never send a fragment";
        if (c <= 0x20 || c >= 0x7f)
            return quote(p) + " contains " + byte_text(c) + ": percent-encode it (e.g. %20)";
    }
    // requests are matched after normalisation (PathNormalize.hpp): a path
    // in another form would never match
    const NormalizedTarget n = normalize_target(p);
    if (!n.error.empty())
        return quote(p) + ": " + n.error + "; requests with it are rejected with 400, so it can never match";
    if (n.target != p)
        return quote(p) + " is not in normal form (requests are matched after percent-decoding of unreserved "
                          "characters, merging of '/' runs and removal of dot segments): write " +
               quote(n.target);
    return std::nullopt;
}

std::optional<std::string> check_method(std::string_view m)
{
    if (!is_token(m))
        return quote(m) + " is not a method token (RFC 9110: letters, digits and !#$%&'*+-.^_`|~)";
    if (std::any_of(m.begin(), m.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
        std::string upper(m);
        std::transform(upper.begin(), upper.end(), upper.begin(),
                       [](char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c; });
        return quote(m) + ": methods are case-sensitive and l7fast only routes upper-case ones; write " +
               quote(upper);
    }
    if (m == "CONNECT")
        return "CONNECT requests are never routed (tunnels are not supported); remove it";
    return std::nullopt;
}

std::optional<std::string> check_header_value(std::string_view v)
{
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return quote(v) + " contains " + byte_text(c) + ", which no valid request carries";
    }
    if (!v.empty() && (v.front() == ' ' || v.front() == '\t' || v.back() == ' ' || v.back() == '\t'))
        return quote(v) + " has leading or trailing whitespace, which is removed from requests "
                           "before comparing, so it could never match";
    return std::nullopt;
}

std::optional<std::string> check_absolute_path(std::string_view p)
{
    if (p.empty() || p.front() != '/')
        return quote(p) + " must be an absolute path";
    for (char c : p)
        if (static_cast<unsigned char>(c) < 0x20)
            return quote(p) + " contains a control character";
    return std::nullopt;
}

std::optional<std::string> check_field_name(std::string_view name)
{
    if (!is_token(name))
        return quote(name) + " is not a header field name (RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)";
    if (name.size() > kMaxFieldNameBytes)
        return "the name is " + std::to_string(name.size()) + " bytes long; at most " +
               std::to_string(kMaxFieldNameBytes);
    return std::nullopt;
}

bool is_reserved_field(std::string_view lower_name)
{
    return std::find(kReservedFields.begin(), kReservedFields.end(), lower_name) != kReservedFields.end();
}

std::string reserved_field_message(std::string_view lower_name)
{
    return quote(lower_name) + " cannot be changed: l7fast writes the framing and connection fields itself (" +
           "host, content-length, transfer-encoding, connection, keep-alive, proxy-connection, te, trailer, upgrade)";
}

std::optional<std::string> check_written_value(std::string_view v)
{
    if (v.size() > kMaxFieldValueBytes)
        return "the value is " + std::to_string(v.size()) + " bytes long; at most " +
               std::to_string(kMaxFieldValueBytes);
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return quote(v) + " contains " + byte_text(c) +
                   ": field values cannot hold control characters other than tab";
    }
    if (!v.empty() && (v.front() == ' ' || v.front() == '\t' || v.back() == ' ' || v.back() == '\t'))
        return quote(v) + " has leading or trailing whitespace, which recipients remove";
    return std::nullopt;
}

std::optional<std::string> check_claim_text(std::string_view v)
{
    if (v.empty())
        return std::string("empty");
    if (v.size() > kMaxClaimTextBytes)
        return "the text is " + std::to_string(v.size()) + " bytes long; at most " + std::to_string(kMaxClaimTextBytes);
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f)
            return quote(v) + " contains " + byte_text(c);
    }
    return std::nullopt;
}

std::optional<std::string> check_query_text(std::string_view v, bool is_name)
{
    if (is_name && v.empty())
        return std::string("empty; give the parameter's name");
    if (v.size() > kMaxFieldValueBytes)
        return "the text is " + std::to_string(v.size()) + " bytes long; at most " +
               std::to_string(kMaxFieldValueBytes);
    for (char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c >= 0x7f)
            return quote(v) + " contains " + byte_text(c) +
                   ": query parameters are compared byte for byte as sent; percent-encode it (e.g. %20)";
        if (c == '&' || c == '#' || (is_name && c == '='))
            return quote(v) + " contains '" + std::string(1, ch) + "', which cannot be part of a parameter's " +
                   (is_name ? "name" : "value");
    }
    return std::nullopt;
}

bool is_prime(int64_t n)
{
    if (n < 2)
        return false;
    for (int64_t d = 2; d * d <= n; d++)
        if (n % d == 0)
            return false;
    return true;
}

bool is_loopback(const SocketAddress& a)
{
    static constexpr std::array<uint8_t, 16> kLoopback6{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return a.family == AF_INET ? a.ip[0] == 127 : a.ip == kLoopback6;
}

}  // namespace l7fast::policy::loader
