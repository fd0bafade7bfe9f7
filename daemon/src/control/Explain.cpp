#include "control/Explain.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>

#include "auth/Jwt.hpp"
#include "auth/JsonReader.hpp"
#include "control/Json.hpp"
#include "lb/KeyHash.hpp"
#include "config/Describe.hpp"
#include "semantics/PathNormalize.hpp"
#include "config/Text.hpp"
#include "proxy/Http.hpp"
#include "proxy/Pipeline.hpp"

namespace l7fast::control {

namespace {

using policy::ConditionRef;
using policy::RequestKey;

bool has_ctl_or_space(std::string_view s)
{
    for (unsigned char c : s)
        if (c <= ' ' || c == 0x7f)
            return true;
    return false;
}

bool has_line_break(std::string_view s)
{
    return s.find_first_of("\r\n", 0) != std::string_view::npos || s.find('\0') != std::string_view::npos;
}

std::string key_text(const RequestKey& k)
{
    switch (k.kind) {
    case RequestKey::Kind::Header: return "header:" + k.name;
    case RequestKey::Kind::Cookie: return "cookie:" + k.name;
    case RequestKey::Kind::SourceIp: return "source_ip";
    case RequestKey::Kind::Claim: return "claim:" + k.name;
    }
    return "?";
}

// A key's value for people: text as is, the client address as an address.
std::string key_value_text(const RequestKey& k, const std::string& v)
{
    if (k.kind != RequestKey::Kind::SourceIp)
        return v;
    char buf[INET6_ADDRSTRLEN] = {};
    if (v.size() == 4)
        inet_ntop(AF_INET, v.data(), buf, sizeof(buf));
    else if (v.size() == 16)
        inet_ntop(AF_INET6, v.data(), buf, sizeof(buf));
    return buf;
}

std::string hex64(uint64_t v)
{
    char buf[19];
    std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// The head explain() sends through the parser, with what it needs to know
// about how it was built.
struct BuiltRequest {
    std::string head;
    uint32_t listener = 0;
    int family = 0;
    std::array<uint8_t, 16> ip{};
    std::string source;
    std::string host_from = "header";  // header, url or placeholder
    std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
};

std::optional<BuiltRequest> build_request(const policy::Policy& pol, const ExplainRequest& req, std::string* error)
{
    BuiltRequest b;
    if (req.method.empty() || req.method.size() > 32 || has_ctl_or_space(req.method)) {
        *error = "the method must be one token (e.g. GET), got \"" + req.method + "\"";
        return std::nullopt;
    }
    if (req.url.empty() || has_ctl_or_space(req.url)) {
        *error = "the URL must be non-empty, without spaces or control characters";
        return std::nullopt;
    }
    std::string target = req.url, authority;
    for (const char* scheme : {"http://", "https://"}) {
        if (policy::text::lower(std::string_view(req.url).substr(0, std::strlen(scheme))) != scheme)
            continue;
        const std::string rest = req.url.substr(std::strlen(scheme));
        const size_t end = rest.find_first_of("/?");
        authority = rest.substr(0, end);
        if (authority.empty() || authority.find('@') != std::string::npos) {
            *error = "the URL's authority must be host[:port], got \"" + authority + "\"";
            return std::nullopt;
        }
        target = end == std::string::npos ? "/" : rest.substr(end);
        if (target.front() == '?')
            target = "/" + target;
        break;
    }
    if (target.front() != '/' && target != "*") {
        *error = "the URL must be a path (/a?b) or http://host/path, got \"" + req.url + "\"";
        return std::nullopt;
    }
    if (req.headers.size() > kExplainMaxHeaders) {
        *error = "more than " + std::to_string(kExplainMaxHeaders) + " headers";
        return std::nullopt;
    }
    bool has_host = false;
    for (const auto& [name, value] : req.headers) {
        if (name.empty() || name.find(':') != std::string::npos || has_ctl_or_space(name) || has_line_break(value)) {
            *error = "header \"" + name + "\": give it as 'Name: value' (a name without spaces or ':', a value "
                     "on one line)";
            return std::nullopt;
        }
        has_host = has_host || policy::text::iequals(name, "host");
    }
    if (!has_host) {
        // as curl does: the URL's authority, else a placeholder (HTTP/1.1
        // requires a Host field)
        b.headers.emplace_back("Host", authority.empty() ? "localhost" : authority);
        b.host_from = authority.empty() ? "placeholder" : "url";
    }
    for (const auto& h : req.headers)
        b.headers.push_back(h);
    if (!req.token.empty()) {
        if (has_ctl_or_space(req.token)) {
            *error = "the token must not contain spaces or control characters";
            return std::nullopt;
        }
        if (pol.jwt_providers.empty()) {
            *error = "--token: the policy has no jwt_provider to send it to";
            return std::nullopt;
        }
        std::string cookies;
        std::vector<std::string> sent;  // header names (lower-case) already holding the token
        for (const auto& p : pol.jwt_providers) {
            if (p.from.kind == RequestKey::Kind::Cookie) {
                cookies += (cookies.empty() ? "" : "; ") + p.from.name + "=" + req.token;
                continue;
            }
            bool given = false;
            for (const auto& h : req.headers)
                given = given || policy::text::iequals(h.first, p.from.name);
            const std::string lname = policy::text::lower(p.from.name);
            if (given || std::find(sent.begin(), sent.end(), lname) != sent.end())
                continue;
            sent.push_back(lname);
            b.headers.emplace_back(p.from.name, p.from_prefix + req.token);
        }
        if (!cookies.empty())
            b.headers.emplace_back("Cookie", cookies);
    }

    b.head = req.method + " " + target + " HTTP/1.1\r\n";
    for (const auto& [name, value] : b.headers)
        b.head += name + ": " + value + "\r\n";
    b.head += "\r\n";
    if (b.head.size() > kExplainMaxBytes) {
        *error = "the request head is over " + std::to_string(kExplainMaxBytes) + " bytes";
        return std::nullopt;
    }

    if (pol.listeners.empty()) {
        *error = "the policy has no listener";
        return std::nullopt;
    }
    if (req.listener.empty()) {
        b.listener = 0;
    } else {
        const policy::Listener* l = pol.find_listener(req.listener);
        if (!l) {
            std::vector<std::string> names;
            for (const auto& x : pol.listeners)
                names.push_back(x.name);
            *error = "no listener named \"" + req.listener + "\"";
            if (auto guess = policy::text::closest(req.listener, names))
                *error += " (did you mean \"" + *guess + "\"?)";
            return std::nullopt;
        }
        b.listener = static_cast<uint32_t>(l - pol.listeners.data());
    }

    b.source = req.source.empty() ? "127.0.0.1" : req.source;
    in_addr a4{};
    in6_addr a6{};
    if (inet_pton(AF_INET, b.source.c_str(), &a4) == 1) {
        b.family = AF_INET;
        std::memcpy(b.ip.data(), &a4, 4);
    } else if (inet_pton(AF_INET6, b.source.c_str(), &a6) == 1) {
        static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(&a6, kMapped, sizeof(kMapped)) == 0) {
            b.family = AF_INET;
            std::memcpy(b.ip.data(), reinterpret_cast<const uint8_t*>(&a6) + 12, 4);
        } else {
            b.family = AF_INET6;
            std::memcpy(b.ip.data(), &a6, 16);
        }
    } else {
        *error = "--source: \"" + b.source + "\" is not an IPv4 or IPv6 address";
        return std::nullopt;
    }
    return b;
}

// Whether the kernel's tables would make routes[i] a candidate: its
// listener and every condition the kernel evaluates (method, host, exact
// and prefix paths, present and exact headers) hold; the others are
// compiled as "any" (PolicyCompiler.hpp, soundness).
bool kernel_superset_holds(const policy::Route& r, const policy::RouteTrace& t)
{
    if (!t.in_scope)
        return false;
    for (const policy::ConditionResult& c : t.conditions) {
        bool kernel_evaluates = false;
        switch (c.ref.kind) {
        case ConditionRef::Kind::Method:
        case ConditionRef::Kind::Host: kernel_evaluates = true; break;
        case ConditionRef::Kind::Path: kernel_evaluates = r.match.path_kind != policy::PathMatch::Regex; break;
        case ConditionRef::Kind::Header: {
            const auto k = r.match.headers.at(c.ref.index).kind;
            kernel_evaluates = k == policy::HeaderCondition::Kind::Present || k == policy::HeaderCondition::Kind::Exact;
            break;
        }
        default: break;
        }
        if (kernel_evaluates && !c.held)
            return false;
    }
    return true;
}

// How the kernel's JWT admission (bpf/include/l7_jwtcache.h) reads a
// request's token: a 401 it can send itself (no token, an empty or too
// large one), a shape it leaves to the slow path, or a token to look up in
// the verified-token cache.
enum class KernelToken { Refused, Other, Present };

KernelToken kernel_token(const policy::JwtProvider& p, const policy::RequestView& view)
{
    const policy::HeaderField* field = nullptr;
    for (const policy::HeaderField& f : view.headers)
        if (policy::text::iequals(f.name, p.from.name)) {
            if (field)
                return KernelToken::Other;  // a repeated match header: the route pass hands it over
            field = &f;
        }
    if (!field)
        return KernelToken::Refused;
    const std::string_view v = field->value, prefix = p.from_prefix;
    // another scheme; a value no longer than the prefix may be the scheme alone
    if (v.size() < prefix.size() || !policy::text::iequals(v.substr(0, prefix.size()), prefix))
        return v.size() > prefix.size() ? KernelToken::Refused : KernelToken::Other;
    const std::string_view token = v.substr(prefix.size());
    if (token.empty())
        return KernelToken::Refused;
    if (token.front() == ' ' || token.front() == '\t')
        return KernelToken::Other;
    if (token.size() > p.max_token_bytes)
        return KernelToken::Refused;
    return token.size() > L7_JWT_MAX_TOKEN ? KernelToken::Other : KernelToken::Present;
}

struct Plane {
    bool kernel = false;
    std::string reason;  // the data plane's hand-over reason (L7_REASON_NAMES), "" for kernel
    std::string why;
    std::string then;    // what happens to the next request like this one, when it differs
    bool answered = false;  // the kernel sends the route's own answer
};

class Explainer {
public:
    Explainer(const proxy::PolicyRuntime& rt, const ExplainPlacement& placement, const ExplainContext& context)
        : rt_(rt), pol_(rt.policy()), placement_(placement), context_(context)
    {
    }

    std::optional<std::string> run(const ExplainRequest& req, std::string* error);

private:
    bool route_in_kernel(size_t i) const
    {
        return i < placement_.routes.size() && placement_.routes[i].kernel;
    }
    std::string route_placement_reason(size_t i) const
    {
        return i < placement_.routes.size() ? placement_.routes[i].reason : "placement not known";
    }
    void write_request(const BuiltRequest& b, const ExplainRequest& req);
    void write_refusal(int status, const std::string& reason, const std::string& detail);
    void write_plane(const Plane& p);
    void write_response(std::optional<int> status, const std::string& reason);
    Plane plane_before_routing() const;

    const proxy::PolicyRuntime& rt_;
    const policy::Policy& pol_;
    const ExplainPlacement& placement_;
    const ExplainContext& context_;
    JsonWriter w_;
};

void Explainer::write_request(const BuiltRequest& b, const ExplainRequest& req)
{
    w_.key("policy").begin_object().field("source", context_.policy_source);
    if (context_.generation)
        w_.field("generation", context_.generation);
    else
        w_.key("generation").null();
    w_.field("placement", placement_.source).end_object();
    w_.key("request").begin_object().field("method", req.method);
    const std::string_view line(b.head.data(), b.head.find("\r\n"));
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    w_.field("target", std::string(line.substr(sp1 + 1, sp2 - sp1 - 1)))
        .field("listener", pol_.listeners[b.listener].name)
        .field("source", b.source)
        .field("host_from", b.host_from)
        .key("headers")
        .begin_array();
    for (const auto& [name, value] : b.headers)
        w_.begin_object().field("name", name).field("value", value).end_object();
    w_.end_array().end_object();
}

void Explainer::write_plane(const Plane& p)
{
    w_.key("plane").begin_object().field("plane", p.kernel ? "kernel" : "user");
    if (p.reason.empty())
        w_.key("reason").null();
    else
        w_.field("reason", "to_slow_path_" + p.reason);
    w_.field("why", p.why);
    if (p.then.empty())
        w_.key("then").null();
    else
        w_.field("then", p.then);
    if (!pol_.daemon.offload_remote_clients)
        w_.field("remote_clients", "user (daemon.offload_remote_clients = false)");
    else
        w_.field("remote_clients", p.kernel ? "kernel" : "user");
    w_.end_object();
}

void Explainer::write_response(std::optional<int> status, const std::string& reason)
{
    w_.key("response").begin_object();
    if (status)
        w_.field("status", static_cast<int64_t>(*status)).field("by", "l7fast");
    else
        w_.key("status").null().field("by", "upstream");
    if (reason.empty())
        w_.key("reason").null();
    else
        w_.field("reason", reason);
    w_.end_object();
}

void Explainer::write_refusal(int status, const std::string& reason, const std::string& detail)
{
    w_.key("refused").begin_object().field("status", static_cast<int64_t>(status)).field("reason", reason)
        .field("detail", detail).end_object();
    w_.key("routes").begin_array().end_array();
    w_.key("route").null();
    w_.key("stages").begin_array().end_array();
    w_.key("upstream").null();
    write_response(status, reason);
}

// The data plane's checks before it matches (l7_decide's order).
Plane Explainer::plane_before_routing() const
{
    Plane p;
    if (!pol_.daemon.kernel_dataplane) {
        p.reason = "disabled";
        p.why = "daemon.kernel_dataplane = false: every request is the slow path's";
        return p;
    }
    if (placement_.source.empty()) {
        p.reason = "disabled";
        p.why = "the data plane is not running (l7fastctl status says why)";
        return p;
    }
    return p;
}

std::optional<std::string> Explainer::run(const ExplainRequest& req, std::string* error)
{
    std::optional<BuiltRequest> built = build_request(pol_, req, error);
    if (!built)
        return std::nullopt;
    const BuiltRequest& b = *built;

    w_.begin_object();
    write_request(b, req);

    l7_msg m{};
    const int st = proxy::parse_head(std::span<const char>(b.head.data(), b.head.size()), true, &m);
    if (st != L7_P_OK && st != L7_P_ERROR) {
        *error = "the request head did not parse as one complete head (status " + std::to_string(st) + ")";
        return std::nullopt;
    }
    Plane plane = plane_before_routing();
    const bool dataplane = plane.reason.empty();
    // the data plane hands a request over for the first reason it meets, in
    // this order
    auto user_plane = [&](const char* reason, std::string why) {
        if (dataplane && plane.reason.empty()) {
            plane.reason = reason;
            plane.why = std::move(why);
        }
    };
    if (dataplane && (placement_.listeners.size() <= b.listener || !placement_.listeners[b.listener].kernel))
        user_plane("no_conn", "listener " + pol_.listeners[b.listener].name + " is not in the data plane: " +
                                  (b.listener < placement_.listeners.size() ? placement_.listeners[b.listener].reason
                                                                            : std::string("placement not known")));

    if (st == L7_P_ERROR) {
        user_plane("parse", "malformed or ambiguous HTTP: the slow path refuses it");
        write_plane(plane);
        write_refusal(m.status ? m.status : 400, std::string("bad_request:") + proxy::parse_error_name(m.error),
                      "the request head is malformed or ambiguous");
        w_.end_object();
        return w_.str();
    }
    const std::string_view head(b.head);
    const std::string_view method = head.substr(0, head.find(' '));
    std::string target(head.substr(m.target_off, m.target_len));
    if ((m.flags & (L7_MF_UPGRADE | L7_MF_EXPECT_OTHER)) || m.method == L7_M_CONNECT ||
        m.body_kind == L7_BODY_CHUNKED || m.content_length > (1ULL << 30))
        user_plane("unsupported", "upgrades, expectations, CONNECT, chunked and over-1-GiB bodies are the slow "
                                  "path's");
    if (m.flags & L7_MF_EXPECT_OTHER) {
        write_plane(plane);
        write_refusal(417, "unsupported:expect", "an Expect other than 100-continue");
        w_.end_object();
        return w_.str();
    }
    if (m.method == L7_M_CONNECT) {
        write_plane(plane);
        write_refusal(501, "unsupported:connect", "CONNECT is not supported");
        w_.end_object();
        return w_.str();
    }
    const uint64_t total = m.hdr_len + (m.body_kind == L7_BODY_LENGTH ? m.content_length : 0);
    if (total > pol_.daemon.ingress_budget)
        user_plane("too_big", "the request (" + std::to_string(total) + " bytes) is over daemon.ingress_budget (" +
                                  std::to_string(pol_.daemon.ingress_budget) + ")");
    std::string normal_head;
    if (m.flags & L7_MF_PATH_NOT_NORMAL) {
        user_plane("path_not_normal", "the path is not in normal form: the slow path normalises it");
        const policy::NormalizedTarget normal = policy::normalize_target(target);
        if (!normal.error.empty()) {
            write_plane(plane);
            write_refusal(400, std::string("bad_request:") + normal.cause, normal.error);
            w_.end_object();
            return w_.str();
        }
        normal_head.append(head.substr(0, m.target_off));
        normal_head.append(normal.target);
        normal_head.append(head.substr(m.target_off + m.target_len));
        w_.field("normalized_target", normal.target);
        target = normal.target;
    } else {
        w_.key("normalized_target").null();
    }
    w_.key("refused").null();
    const std::string_view head_in = normal_head.empty() ? head : std::string_view(normal_head);

    std::vector<policy::HeaderField> fields;
    for (unsigned i = 0; i < m.n_hdrs && i < L7_MAX_HEADERS; i++)
        fields.push_back({head.substr(m.hdr[i].name_off, m.hdr[i].name_len),
                          head.substr(m.hdr[i].val_off, m.hdr[i].val_len)});
    policy::RequestView view;
    view.method = method;
    view.target = target;
    view.headers = fields;
    view.listener = b.listener;
    view.client_family = b.family;
    view.client_ip = b.ip;

    // explain takes no token from a rate limiter: the stages run on a copy
    // of the runtime without them
    proxy::PolicyRuntime rt = rt_;
    rt.limiters.assign(rt.limiters.size(), nullptr);
    proxy::RequestAuth auth(rt, view, context_.now);
    const policy::ClaimsLookup lookup = auth.lookup();

    std::optional<uint32_t> matched;
    std::optional<size_t> candidate;  // the route the kernel's tables pick
    w_.key("routes").begin_array();
    for (uint32_t i = 0; i < pol_.routes.size() && !matched; i++) {
        const policy::Route& r = pol_.routes[i];
        const policy::RouteTrace t = rt.router->trace(i, view, lookup);
        w_.begin_object()
            .field("index", static_cast<uint64_t>(i))
            .field("route", r.name)
            .field("listener_in_scope", t.in_scope)
            .key("conditions")
            .begin_array();
        for (const auto& c : t.conditions)
            w_.begin_object()
                .field("condition", policy::describe_condition(r.match, c.ref))
                .field("held", c.held)
                .end_object();
        w_.end_array();
        if (!r.match.claims.empty())
            w_.field("token_verified", t.claims_verified).field("token_valid", t.claims_present);
        w_.field("matched", t.matched)
            .field("placement", route_in_kernel(i) ? "kernel" : "user")
            .end_object();
        if (!candidate && (route_in_kernel(i) ? t.matched : kernel_superset_holds(r, t)))
            candidate = i;
        if (t.matched)
            matched = i;
    }
    w_.end_array();
    // Router::route is what the slow path runs: the trace must agree
    if (matched != rt.router->route(view, lookup)) {
        *error = "internal error: the route trace disagrees with the router; please report this request";
        return std::nullopt;
    }

    if (!matched) {
        user_plane("no_route", "no route matches: the slow path answers 404");
        write_plane(plane);
        w_.key("route").null();
        w_.key("stages").begin_array().end_array();
        w_.key("upstream").null();
        write_response(404, "no_route");
        w_.end_object();
        return w_.str();
    }
    const uint32_t ri = *matched;
    const policy::Route& route = pol_.routes[ri];
    w_.field("route", route.name);

    if (candidate && !route_in_kernel(*candidate))
        user_plane("route_user", "route " + pol_.routes[*candidate].name + " runs in user space (" +
                                     route_placement_reason(*candidate) + ")" +
                                     (*candidate != ri ? "; the kernel cannot rule it out, so the slow path "
                                                         "decides (it picks route " + route.name + ")"
                                                       : ""));

    const proxy::Verdict v = proxy::decide(rt, ri, view, auth, 1);
    w_.key("stages").begin_array();
    if (ri < rt.route_jwt.size() && rt.route_jwt[ri]) {
        const size_t pi = *rt.route_jwt[ri];
        const policy::JwtProvider& p = pol_.jwt_providers[pi];
        const auth::Result& res = auth.result(pi);
        w_.begin_object().field("stage", "jwt").field("provider", p.name).field("from", key_text(p.from));
        w_.field("result", res.ok() ? std::string("valid") : v.kind == proxy::Verdict::Kind::JwtMissing
                                                                   ? std::string("jwt_missing")
                                                                   : "jwt_" + std::string(auth::reason_name(res.reason)));
        w_.end_object();
        const KernelToken kt = kernel_token(p, view);
        const char* refusal = res.status == auth::Status::Missing ? "jwt_none" : "jwt_bad";
        const bool kernel_sends = ri < placement_.routes.size() && placement_.routes[ri].kernel_unauthorized;
        if (kt == KernelToken::Refused && !kernel_sends)
            user_plane(refusal, "no token where provider " + p.name + " looks, or an empty or too large one: the "
                                "slow path answers 401 (beyond the kernel's " + std::to_string(L7_MAX_RESPONSES) +
                                " answers)");
        if (kt == KernelToken::Refused && kernel_sends) {
            // the kernel sends the 401 (l7_g_decide), in its keep-alive form only
            if (m.flags & L7_MF_CLOSE)
                user_plane(refusal, "no token, or an empty or too large one, and the request asks to close the "
                                    "connection: the slow path answers 401 with connection: close");
            plane.answered = true;
        } else if (kt == KernelToken::Other) {
            user_plane("jwt_other", "the token's shape is the slow path's to read (the scheme alone, spaces after "
                                    "it, or longer than the kernel's verified-token cache holds)");
        } else if (!res.ok())
            user_plane("jwt_miss", "the token is not valid, so never in the kernel's verified-token cache: the "
                                   "slow path answers 401");
        else if (dataplane && plane.reason.empty()) {
            user_plane("jwt_miss", "first sight of this token: the slow path verifies it and caches it for the "
                                   "kernel");
            plane.then = "kernel: requests with the same token, until it expires";
        }
    }
    if (v.kind != proxy::Verdict::Kind::JwtMissing && v.kind != proxy::Verdict::Kind::JwtInvalid && route.rbac) {
        const bool allowed = v.kind != proxy::Verdict::Kind::RbacDenied;
        w_.begin_object()
            .field("stage", "rbac")
            .field("mode", route.rbac->mode == policy::Rbac::Mode::FirstMatch ? "first_match" : "deny_overrides")
            .field("rule", v.rbac_rule >= 0 ? proxy::rbac_rule_name(route, v) : std::string("default"))
            .field("allowed", allowed)
            .end_object();
        const std::string deny = std::to_string(route.rbac->deny_status);
        const bool kernel_sends = ri < placement_.routes.size() && placement_.routes[ri].kernel_denials;
        if (!allowed && !kernel_sends)
            user_plane("rbac_deny", "RBAC denies: the slow path answers " + deny + " (a denial over " +
                                        std::to_string(L7_MAX_RESP_BYTES) + " bytes, or beyond the kernel's " +
                                        std::to_string(L7_MAX_RESPONSES) + " answers)");
        if (!allowed && kernel_sends) {
            // the kernel sends the denial (l7_g_decide), in its keep-alive form only
            if (m.flags & L7_MF_CLOSE)
                user_plane("rbac_deny", "RBAC denies and the request asks to close the connection: the slow "
                                        "path answers " + deny + " with connection: close");
            plane.answered = true;
        }
    }
    const bool passed = v.kind == proxy::Verdict::Kind::Forward || v.kind == proxy::Verdict::Kind::Direct;
    if (passed && route.rate_limit) {
        const policy::RateLimit& rl = *route.rate_limit;
        w_.begin_object()
            .field("stage", "rate_limit")
            .field("rate", static_cast<uint64_t>(rl.rate))
            .field("burst", static_cast<uint64_t>(rl.burst));
        // a kernel route's rate limit is on the kernel's buckets (the
        // compiler places it in user space otherwise), but for a key longer
        // than the kernel keeps: the data plane hands that request over
        bool kernel_bucket = route_in_kernel(ri);
        if (rl.key) {
            w_.field("key", key_text(*rl.key));
            if (auto kv = policy::request_key(*rl.key, view, v.claims)) {
                w_.field("key_value", key_value_text(*rl.key, *kv));
                if (kernel_bucket && kv->size() > L7_RATE_KEY_MAX) {
                    kernel_bucket = false;
                    user_plane("rate_key", "its rate-limit key is longer than " + std::to_string(L7_RATE_KEY_MAX) +
                                               " bytes: the slow path keeps that key's bucket");
                }
            } else {
                w_.key("key_value").null();
            }
        } else {
            w_.field("key", "route");
        }
        const bool kernel_429 = kernel_bucket && placement_.routes[ri].kernel_limited;
        w_.field("bucket", kernel_bucket ? "kernel (shared with the slow path)" : "user space");
        w_.field("note", kernel_429
                             ? "explain takes no token: the running bucket decides (429 when empty; the kernel "
                               "sends it, the slow path when the request asks to close the connection)"
                             : "explain takes no token: the running bucket decides (429 when empty)")
            .end_object();
    }
    if (v.kind == proxy::Verdict::Kind::Direct && route.direct_response)
        w_.begin_object()
            .field("stage", "direct_response")
            .field("status", static_cast<int64_t>(route.direct_response->status))
            .end_object();

    std::optional<int> status;
    std::string reason;
    if (v.kind != proxy::Verdict::Kind::Forward) {
        status = proxy::local_status(route, v);
        reason = proxy::verdict_reason(route, v);
        if (v.kind == proxy::Verdict::Kind::Direct) {
            // a kernel route's direct response is the kernel's to send
            // (l7_g_decide), in its keep-alive form only
            if (m.flags & L7_MF_CLOSE)
                user_plane("answer_close", "the request asks to close the connection: the slow path sends the "
                                           "answer with connection: close");
            plane.answered = true;
        }
    }

    // forwarding: the upstream head, the cluster, the endpoint
    bool wrote_upstream = false;
    if (v.kind == proxy::Verdict::Kind::Forward) {
        const proxy::UpstreamHead uh = proxy::upstream_request_head(rt, ri, head_in, v.claims);
        w_.begin_object().field("stage", "request_headers").field("rewritten", uh.rewritten);
        if (uh.rewritten && uh.ok)
            w_.field("upstream_head", uh.bytes);
        w_.end_object();
        w_.end_array();  // stages

        const auto& rcs = rt.route_clusters.at(ri);
        w_.key("upstream").begin_object();
        w_.key("clusters").begin_array();
        uint64_t total_weight = 0;
        for (const auto& wc : route.clusters)
            total_weight += wc.weight;
        for (const auto& wc : route.clusters) {
            w_.begin_object().field("cluster", wc.cluster).field("weight", static_cast<uint64_t>(wc.weight));
            w_.end_object();
        }
        w_.end_array();
        std::optional<size_t> ci;
        if (rcs.size() == 1)
            ci = 0;
        else if (total_weight == 0 && !rcs.empty())
            ci = 0;
        if (!ci) {
            w_.key("cluster").null().field("cluster_choice", "at random by weight, per request");
            w_.key("endpoint").null();
        } else {
            const size_t cidx = rcs.at(*ci);
            const policy::Cluster& c = pol_.clusters[cidx];
            w_.field("cluster", c.name).field("cluster_choice", rcs.size() == 1 ? "the route's only cluster"
                                                                                : "weights sum to 0: the first");
            w_.field("lb", policy::lb_name(c.lb));
            const lb::HashBalancer* hb = cidx < rt.balancers.size() ? rt.balancers[cidx].get() : nullptr;
            // endpoints that take no new request now (running daemon only)
            std::vector<bool> up(c.endpoints.size(), true);
            size_t n_up = c.endpoints.size();
            w_.key("endpoints_out").begin_array();
            for (size_t i = 0; i < c.endpoints.size(); i++) {
                const std::string why = context_.endpoint_out ? context_.endpoint_out(c.endpoints[i].address) : "";
                if (why.empty())
                    continue;
                up[i] = false;
                n_up--;
                w_.begin_object().field("endpoint", c.endpoints[i].address.str()).field("state", why).end_object();
            }
            w_.end_array();
            std::optional<size_t> e;
            if (c.endpoints.empty()) {
                w_.field("endpoint_choice", "the cluster has no endpoints");
            } else if (n_up == 0) {
                w_.field("endpoint_choice", "every endpoint is out (drained, unhealthy or ejected)");
                user_plane("endpoint_down", "every endpoint of cluster " + c.name + " is out");
            } else if (c.endpoints.size() == 1) {
                e = 0;
                w_.field("endpoint_choice", "the cluster's only endpoint");
            } else if (hb) {
                std::optional<std::string> key;
                if (c.hash_key)
                    key = policy::request_key(*c.hash_key, view, v.claims);
                w_.key("hash").begin_object().field("key", c.hash_key ? key_text(*c.hash_key) : std::string("-"));
                if (key) {
                    const uint64_t h = lb::key_hash(*key);
                    w_.field("value", key_value_text(*c.hash_key, *key)).field("xxh64", hex64(h));
                    if (const lb::RingHash* ring = hb->ring())
                        w_.field("ring_point", static_cast<uint64_t>(ring->find(h)))
                            .field("ring_size", static_cast<uint64_t>(ring->size()));
                    else if (const lb::Maglev* mg = hb->maglev())
                        w_.field("table_slot", h % mg->table_size())
                            .field("table_size", mg->table_size());
                    if (auto pick = hb->choose(h)) {
                        e = *pick;
                        if (!up.at(*e)) {
                            w_.field("table_endpoint", c.endpoints.at(*e).address.str());
                            user_plane("endpoint_down",
                                       "the key's endpoint " + c.endpoints.at(*e).address.str() +
                                           " is out: the slow path sends the key where the table built over the "
                                           "endpoints that are in does");
                            e = hb->choose_available(h, up);
                        }
                    }
                } else {
                    w_.key("value").null();
                }
                w_.end_object();
                w_.field("endpoint_choice",
                         !key ? "the request has no " + (c.hash_key ? key_text(*c.hash_key) : std::string("key")) +
                                    ": a random endpoint per request"
                              : hb->bounded() ? "by the key's hash; bounded load moves it when that endpoint is busy"
                                              : "by the key's hash");
            } else {
                w_.field("endpoint_choice",
                         std::string(c.lb == policy::LbPolicy::Weighted ? "at random by weight, per request"
                                                                         : "round robin") +
                             (n_up < c.endpoints.size() ? ", among the " + std::to_string(n_up) + " endpoints that are in"
                                                        : ""));
            }
            if (e)
                w_.field("endpoint", c.endpoints.at(*e).address.str());
            else
                w_.key("endpoint").null();
            if (c.endpoints.empty()) {
                status = 503;
                reason = "no_endpoint";
            } else if (n_up == 0) {
                status = 503;
                reason = "no_healthy_upstream";
            }
        }
        w_.end_object();
        wrote_upstream = true;
        if (!uh.ok) {
            status = 400;
            reason = "bad_request:mutation";
        }
    }
    if (!wrote_upstream) {
        w_.end_array();  // stages
        w_.key("upstream").null();
    }

    if (dataplane && plane.reason.empty()) {
        plane.kernel = true;
        plane.why = plane.answered
                        ? std::string("a kernel route, and the kernel sends its ") +
                              (v.kind == proxy::Verdict::Kind::RbacDenied ? "RBAC denial"
                               : v.kind == proxy::Verdict::Kind::Direct   ? "direct response"
                                                                          : "401") +
                              " itself when the request is the whole of one write (a body that comes later, or a "
                              "pipelined request behind it, goes to the slow path: to_slow_path_too_big, "
                              "to_slow_path_pipelined)"
                        : "a kernel route, and nothing in the request needs the slow path (it still does when no "
                          "idle pooled connection is free: to_slow_path_pool_miss)";
    }
    write_plane(plane);
    write_response(status, reason);
    w_.end_object();
    return w_.str();
}

}  // namespace

std::string explain_request_json(const ExplainRequest& r)
{
    JsonWriter w;
    w.begin_object().field("method", r.method).field("url", r.url).key("headers").begin_array();
    for (const auto& [name, value] : r.headers)
        w.begin_array().value(name).value(value).end_array();
    w.end_array().field("source", r.source).field("listener", r.listener).field("token", r.token).end_object();
    return w.str();
}

std::optional<ExplainRequest> parse_explain_request(std::string_view json, std::string* error)
{
    auth::json::Limits limits;
    limits.max_bytes = kExplainMaxBytes * 2;
    limits.max_depth = 3;
    limits.max_nodes = 16 + 3 * kExplainMaxHeaders;
    auth::json::Document doc;
    if (!doc.parse(json, limits)) {
        *error = "the request is not JSON: " + std::string(doc.error());
        return std::nullopt;
    }
    if (doc.root().type != auth::json::Type::Object) {
        *error = "the request must be a JSON object";
        return std::nullopt;
    }
    ExplainRequest r;
    for (const auth::json::Node& n : doc.children(doc.root())) {
        std::string* field = n.key == "method"     ? &r.method
                             : n.key == "url"      ? &r.url
                             : n.key == "source"   ? &r.source
                             : n.key == "listener" ? &r.listener
                             : n.key == "token"    ? &r.token
                                                   : nullptr;
        if (field) {
            if (n.type != auth::json::Type::String) {
                *error = "\"" + std::string(n.key) + "\" must be a string";
                return std::nullopt;
            }
            field->assign(n.text);
            continue;
        }
        if (n.key != "headers" || n.type != auth::json::Type::Array) {
            *error = "unknown member \"" + std::string(n.key) + "\" (or \"headers\" not an array)";
            return std::nullopt;
        }
        for (const auth::json::Node& h : doc.children(n)) {
            std::vector<std::string> pair;
            size_t items = 0;
            for (const auth::json::Node& s : doc.children(h)) {
                items++;
                if (s.type == auth::json::Type::String)
                    pair.emplace_back(s.text);
            }
            if (h.type != auth::json::Type::Array || items != 2 || pair.size() != 2) {
                *error = "each header must be [name, value]";
                return std::nullopt;
            }
            if (r.headers.size() >= kExplainMaxHeaders) {
                *error = "more than " + std::to_string(kExplainMaxHeaders) + " headers";
                return std::nullopt;
            }
            r.headers.emplace_back(std::move(pair[0]), std::move(pair[1]));
        }
    }
    return r;
}

std::optional<std::string> explain(const proxy::PolicyRuntime& rt, const ExplainRequest& request,
                                   const ExplainPlacement& placement, const ExplainContext& context,
                                   std::string* error)
{
    Explainer x(rt, placement, context);
    return x.run(request, error);
}

ExplainPlacement offline_placement(const policy::Policy& pol)
{
    uint32_t next = 0;
    std::map<std::string, uint32_t> ids;
    const policy::CompiledTables t = policy::compile(pol, 1, [&](const policy::SocketAddress& a) -> std::optional<uint32_t> {
        auto [it, fresh] = ids.emplace(a.str(), next);
        if (fresh)
            next++;
        return it->second;
    });
    ExplainPlacement p;
    p.routes = t.placement;
    p.listeners = t.listener_placement;
    p.source = "compiled offline (the kernel's features are not known: l7fastctl status on the node says them)";
    return p;
}

}  // namespace l7fast::control

namespace l7fast::control {

namespace {

class ExplainText {
public:
    explicit ExplainText(const auth::json::Document& d) : d_(d) {}

    std::string str(const auth::json::Node* obj, std::string_view key, std::string_view none = "-") const
    {
        const auth::json::Node* n = obj ? d_.find(*obj, key) : nullptr;
        if (!n || n->type == auth::json::Type::Null)
            return std::string(none);
        if (n->type == auth::json::Type::True)
            return "yes";
        if (n->type == auth::json::Type::False)
            return "no";
        return std::string(n->text);
    }
    bool yes(const auth::json::Node* obj, std::string_view key) const
    {
        const auth::json::Node* n = obj ? d_.find(*obj, key) : nullptr;
        return n && n->type == auth::json::Type::True;
    }
    const auth::json::Node* obj(const auth::json::Node* parent, std::string_view key) const
    {
        const auth::json::Node* n = parent ? d_.find(*parent, key) : nullptr;
        return n && (n->type == auth::json::Type::Object || n->type == auth::json::Type::Array) ? n : nullptr;
    }
    auth::json::Document::Children items(const auth::json::Node* n) const { return d_.children(*n); }

private:
    const auth::json::Document& d_;
};

// Each line of `text` after the first indented by `indent` spaces.
std::string indented(std::string_view text, size_t indent)
{
    std::string out;
    for (char c : text) {
        if (c == '\r')
            continue;
        out += c;
        if (c == '\n')
            out.append(indent, ' ');
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '\n'))
        out.pop_back();
    return out;
}

}  // namespace

bool render_explain_text(const std::string& json, std::string* out, std::string* error)
{
    auth::json::Limits limits;
    limits.max_bytes = 16u << 20;
    limits.max_nodes = 1u << 20;
    auth::json::Document d;
    if (!d.parse(json, limits) || d.root().type != auth::json::Type::Object) {
        *error = d.error().empty() ? "not a JSON object" : std::string(d.error());
        return false;
    }
    const ExplainText x(d);
    const auth::json::Node* root = &d.root();
    std::string o;
    const auth::json::Node* pol = x.obj(root, "policy");
    const auth::json::Node* req = x.obj(root, "request");
    o += "Policy:    " + x.str(pol, "source");
    if (x.str(pol, "generation") != "-")
        o += ", generation " + x.str(pol, "generation");
    o += "\n           placement " + x.str(pol, "placement") + "\n";
    o += "Request:   " + x.str(req, "method") + " " + x.str(req, "target") + "  (listener " + x.str(req, "listener") +
         ", client " + x.str(req, "source") + ")\n";
    if (const auth::json::Node* hs = x.obj(req, "headers"))
        for (const auth::json::Node& h : x.items(hs))
            o += "           " + x.str(&h, "name") + ": " + x.str(&h, "value") + "\n";
    if (x.str(req, "host_from") == "placeholder")
        o += "           (Host: localhost added: HTTP/1.1 requires one; give -H 'Host: ...' or an http:// URL)\n";
    if (const std::string nt = x.str(root, "normalized_target"); nt != "-")
        o += "Normalised: " + nt + " (what is matched and forwarded)\n";
    if (const auth::json::Node* ref = x.obj(root, "refused"))
        o += "Refused:   " + x.str(ref, "status") + " " + x.str(ref, "reason") + ": " + x.str(ref, "detail") + "\n";

    if (const auth::json::Node* routes = x.obj(root, "routes")) {
        bool any = false;
        for (const auth::json::Node& r : x.items(routes)) {
            if (!any)
                o += "Routes:    (in order, up to the first that matches)\n";
            any = true;
            o += "  " + x.str(&r, "index") + " " + x.str(&r, "route") + ": " +
                 (x.yes(&r, "matched") ? "MATCHES" : "no") + "  [" + x.str(&r, "placement") + "]\n";
            if (!x.yes(&r, "listener_in_scope"))
                o += "      listener: not one of the route's listeners\n";
            if (const auth::json::Node* cs = x.obj(&r, "conditions")) {
                bool none = true;
                for (const auth::json::Node& c : x.items(cs)) {
                    none = false;
                    o += std::string("      ") + (x.yes(&c, "held") ? "held  " : "FAILED") + " " +
                         x.str(&c, "condition") + "\n";
                }
                if (none)
                    o += "      (no conditions: matches every request on its listeners)\n";
            }
            if (d.find(r, "token_verified") && !x.yes(&r, "token_verified"))
                o += "      (claims not checked: the token is verified only when every other condition holds)\n";
            else if (d.find(r, "token_valid") && !x.yes(&r, "token_valid"))
                o += "      (claims: no valid token for the route's provider)\n";
        }
    }
    o += "Route:     " + x.str(root, "route", "none") + "\n";
    if (const auth::json::Node* stages = x.obj(root, "stages")) {
        for (const auth::json::Node& s : x.items(stages)) {
            const std::string st = x.str(&s, "stage");
            if (st == "jwt") {
                o += "  jwt         provider " + x.str(&s, "provider") + " (token from " + x.str(&s, "from") +
                     "): " + x.str(&s, "result") + "\n";
            } else if (st == "rbac") {
                o += "  rbac        " + x.str(&s, "mode") + ": rule " + x.str(&s, "rule") +
                     (x.yes(&s, "allowed") ? " allows\n" : " denies\n");
            } else if (st == "rate_limit") {
                o += "  rate_limit  " + x.str(&s, "rate") + "/s, burst " + x.str(&s, "burst") + ", key " +
                     x.str(&s, "key");
                if (d.find(s, "key_value"))
                    o += " = " + x.str(&s, "key_value", "(none in the request)");
                if (d.find(s, "bucket"))
                    o += "; bucket: " + x.str(&s, "bucket");
                o += "\n              " + x.str(&s, "note") + "\n";
            } else if (st == "direct_response") {
                o += "  direct      status " + x.str(&s, "status") + "\n";
            } else if (st == "request_headers") {
                if (x.yes(&s, "rewritten") && d.find(s, "upstream_head"))
                    o += "  headers     rewritten; the upstream receives:\n                " +
                         indented(x.str(&s, "upstream_head"), 16) + "\n";
                else
                    o += "  headers     forwarded as received\n";
            }
        }
    }
    if (const auth::json::Node* up = x.obj(root, "upstream")) {
        o += "Upstream:  cluster " + x.str(up, "cluster", "(chosen per request)") + " (" +
             x.str(up, "cluster_choice") + ")";
        if (d.find(*up, "lb"))
            o += ", lb " + x.str(up, "lb");
        o += "\n";
        if (const auth::json::Node* cs = x.obj(up, "clusters"); cs && x.str(up, "cluster") == "-")
            for (const auth::json::Node& c : x.items(cs))
                o += "           " + x.str(&c, "cluster") + " weight " + x.str(&c, "weight") + "\n";
        if (const auth::json::Node* h = x.obj(up, "hash")) {
            o += "           hash key " + x.str(h, "key") + " = " + x.str(h, "value", "(none in the request)");
            if (d.find(*h, "xxh64"))
                o += ", xxh64 " + x.str(h, "xxh64");
            if (d.find(*h, "ring_point"))
                o += ", ring point " + x.str(h, "ring_point") + " of " + x.str(h, "ring_size");
            if (d.find(*h, "table_slot"))
                o += ", Maglev slot " + x.str(h, "table_slot") + " of " + x.str(h, "table_size");
            o += "\n";
        }
        o += "           endpoint " + x.str(up, "endpoint", "(chosen per request)") + " (" +
             x.str(up, "endpoint_choice") + ")\n";
    }
    const auth::json::Node* resp = x.obj(root, "response");
    if (x.str(resp, "by") == "upstream")
        o += "Response:  from the upstream";
    else
        o += "Response:  " + x.str(resp, "status") + " from l7fast";
    if (x.str(resp, "reason") != "-")
        o += " (" + x.str(resp, "reason") + ")";
    o += "\n";
    const auth::json::Node* plane = x.obj(root, "plane");
    o += "Handled:   " + x.str(plane, "plane");
    if (x.str(plane, "reason") != "-")
        o += " (" + x.str(plane, "reason") + ")";
    o += ": " + x.str(plane, "why") + "\n";
    if (x.str(plane, "then") != "-")
        o += "           then " + x.str(plane, "then") + "\n";
    o += "           remote clients: " + x.str(plane, "remote_clients") + "\n";
    *out = std::move(o);
    return true;
}

}  // namespace l7fast::control
