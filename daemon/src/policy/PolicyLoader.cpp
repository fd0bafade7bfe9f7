#include "policy/PolicyLoader.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <unordered_map>

#include <toml++/toml.h>

#include "common/Log.hpp"
#include "l7fast_abi.h"
#include "policy/Text.hpp"

namespace l7fast::policy {

std::string PolicyError::str() const
{
    std::string out = file;
    if (line != 0)
        out += ":" + std::to_string(line) + ":" + std::to_string(column);
    out += ": ";
    if (!key.empty())
        out += key + ": ";
    return out + message;
}

PolicyLoadResult::PolicyLoadResult(Policy policy) : policy_(std::move(policy)) {}

PolicyLoadResult::PolicyLoadResult(std::vector<PolicyError> errors) : errors_(std::move(errors))
{
    if (errors_.empty())
        errors_.push_back({"", 0, 0, "", "policy rejected without a reason (internal error)"});
}

const Policy& PolicyLoadResult::policy() const&
{
    if (!policy_)
        throw std::logic_error("PolicyLoadResult::policy() on a failed load");
    return *policy_;
}

Policy&& PolicyLoadResult::policy() &&
{
    if (!policy_)
        throw std::logic_error("PolicyLoadResult::policy() on a failed load");
    return std::move(*policy_);
}

std::string PolicyLoadResult::error_text() const
{
    std::string out;
    for (const PolicyError& e : errors_)
        out += e.str() + "\n";
    return out;
}

namespace {

using text::is_token;
using text::lower;
using text::quote;

// ---- limits of the format (docs/policy.md) -------------------------------

constexpr size_t kMaxNameLength = 64;
constexpr int64_t kMaxWeight = 65535;        // weights travel as __u16 in l7_route
constexpr int64_t kMaxWeightSum = 65535;
constexpr int64_t kMaxTimeoutMs = 86'400'000;  // one day
constexpr int64_t kMinIngressBudget = 1024;
constexpr size_t kMaxHostLength = 253;        // RFC 1035 presentation form
constexpr size_t kMaxLabelLength = 63;
// Errors collected before sorting; only the first kMaxErrors are reported.
constexpr size_t kMaxCollectedErrors = 1000;

// ---- text -------------------------------------------------------------------

bool is_bare_key(std::string_view k)
{
    return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
}

std::string key_text(std::string_view k)
{
    return is_bare_key(k) ? std::string(k) : quote(k);
}

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

size_t edit_distance(std::string_view a, std::string_view b)
{
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++)
        row[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

// The candidate an operator most likely meant, if one is close enough.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates)
{
    constexpr size_t kCompared = 64;  // typos are short; do not square hostile lengths
    if (word.size() > kCompared)
        return std::nullopt;
    std::optional<std::string> best;
    size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
    for (const std::string& c : candidates) {
        if (c.size() > kCompared)
            continue;
        const size_t d = lower(c) == lower(word) ? 0 : edit_distance(word, c);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

std::string joined(const std::vector<std::string>& items, size_t max_items = 12)
{
    std::string out;
    for (size_t i = 0; i < items.size() && i < max_items; i++)
        out += (i ? ", " : "") + items[i];
    if (items.size() > max_items)
        out += ", ...";
    return out;
}

std::string a_type(toml::node_type t)
{
    switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
    }
}

// ---- values of the format -----------------------------------------------------

// Names appear in l7fastctl output, metrics labels and D-Bus object paths.
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

// The Host condition as the data plane compares it: lower-cased, no port; an
// IPv6 literal keeps its brackets because that is how the Host header says it.
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
            return quote(p) + " contains " + byte_text(c) +
                   ": paths are compared byte for byte as sent; percent-encode it (e.g. %20)";
    }
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

// A field value as the parser hands it over: OWS already trimmed, no CTLs
// but HTAB (RFC 9110 5.5).
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

bool is_loopback(const SocketAddress& a)
{
    static constexpr std::array<uint8_t, 16> kLoopback6{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return a.family == AF_INET ? a.ip[0] == 127 : a.ip == kLoopback6;
}

// ---- errors -------------------------------------------------------------------

class ErrorSink {
public:
    void add(size_t source, SourceLocation at, std::string key, std::string message)
    {
        if (entries_.size() >= kMaxCollectedErrors)
            return;
        entries_.push_back({source, PolicyError{std::move(at.file), at.line, at.column,
                                                std::move(key), std::move(message)}});
    }
    bool empty() const { return entries_.empty(); }

    // By file (load order), then position; at most kMaxErrors.
    std::vector<PolicyError> take()
    {
        std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
            return std::tie(a.source, a.error.line, a.error.column) <
                   std::tie(b.source, b.error.line, b.error.column);
        });
        std::vector<PolicyError> out;
        for (size_t i = 0; i < entries_.size() && i < PolicyLoader::kMaxErrors; i++)
            out.push_back(std::move(entries_[i].error));
        return out;
    }

private:
    struct Entry {
        size_t source;
        PolicyError error;
    };
    std::vector<Entry> entries_;
};

// A parsed file.
struct Document {
    size_t index = 0;  // load order; 0 is the main file
    std::string file;
    toml::table root;
};

// Reports errors about one document's nodes.
class FileContext {
public:
    FileContext(const Document& doc, ErrorSink& sink) : doc_(doc), sink_(sink) {}

    const Document& doc() const { return doc_; }
    SourceLocation at(const toml::node& n) const { return at(n.source()); }
    SourceLocation at(const toml::key& k) const { return at(k.source()); }
    void error(const SourceLocation& where, std::string key, std::string message) const
    {
        sink_.add(doc_.index, where, std::move(key), std::move(message));
    }

private:
    SourceLocation at(const toml::source_region& r) const { return {doc_.file, r.begin.line, r.begin.column}; }

    const Document& doc_;
    ErrorSink& sink_;
};

// Where something was written, with the key path errors about it use.
struct Located {
    size_t source = 0;
    SourceLocation at;
    std::string key;
};

template <class T>
auto expect(const FileContext& cx, const toml::node& n, const std::string& path, std::string_view expected)
{
    auto* v = n.as<T>();
    if (!v)
        cx.error(cx.at(n), path, "expected " + std::string(expected) + ", got " + a_type(n.type()));
    return v;
}

// Typed access to the keys of one table. Keys not in `allowed` are reported
// when the reader is made: unknown keys are errors, never ignored.
class TableReader {
public:
    TableReader(const FileContext& cx, const toml::table& t, std::string path,
                std::vector<std::string> allowed)
        : cx_(cx), table_(t), path_(std::move(path)), allowed_(std::move(allowed))
    {
        for (auto&& [k, v] : table_) {
            if (std::find(allowed_.begin(), allowed_.end(), k.str()) != allowed_.end())
                continue;
            std::string message = "unknown key";
            if (auto guess = closest(k.str(), allowed_))
                message += " (did you mean \"" + *guess + "\"?)";
            cx_.error(cx_.at(k), child(k.str()), message + "; allowed here: " + joined(allowed_, 32));
        }
    }

    const FileContext& context() const { return cx_; }
    const std::string& path() const { return path_; }
    std::string child(std::string_view k) const
    {
        return path_.empty() ? key_text(k) : path_ + "." + key_text(k);
    }
    SourceLocation where() const { return cx_.at(table_); }
    bool has(std::string_view k) const { return table_.get(k) != nullptr; }
    Located located(std::string_view k) const
    {
        const toml::node* n = table_.get(k);
        return {cx_.doc().index, n ? cx_.at(*n) : where(), child(k)};
    }

    void error(std::string_view k, std::string message) const
    {
        const toml::node* n = table_.get(k);
        cx_.error(n ? cx_.at(*n) : where(), child(k), std::move(message));
    }
    void error_here(std::string message) const { cx_.error(where(), path_, std::move(message)); }
    bool is_empty_array(std::string_view k) const
    {
        const toml::node* n = table_.get(k);
        return n && n->is_array() && n->as_array()->empty();
    }
    void missing(std::string_view k, std::string_view why) const
    {
        cx_.error(where(), child(k), "missing; " + std::string(why));
    }

    std::optional<std::string> string(std::string_view k) const
    {
        const toml::node* n = table_.get(k);
        if (!n)
            return std::nullopt;
        auto* v = expect<std::string>(cx_, *n, child(k), "a string");
        return v ? std::optional<std::string>(v->get()) : std::nullopt;
    }
    std::optional<std::string> required_string(std::string_view k, std::string_view why) const
    {
        if (!has(k)) {
            missing(k, why);
            return std::nullopt;
        }
        return string(k);
    }
    std::optional<bool> boolean(std::string_view k) const
    {
        const toml::node* n = table_.get(k);
        if (!n)
            return std::nullopt;
        auto* v = expect<bool>(cx_, *n, child(k), "a boolean (true or false)");
        return v ? std::optional<bool>(v->get()) : std::nullopt;
    }
    std::optional<int64_t> integer(std::string_view k, int64_t lo, int64_t hi, std::string_view hint = {}) const
    {
        const toml::node* n = table_.get(k);
        if (!n)
            return std::nullopt;
        auto* v = expect<int64_t>(cx_, *n, child(k), "an integer");
        if (!v)
            return std::nullopt;
        const int64_t x = v->get();
        if (x < lo || x > hi) {
            std::string message = std::to_string(x) + " is out of range " + std::to_string(lo) + ".." +
                                  std::to_string(hi);
            if (!hint.empty())
                message += " (" + std::string(hint) + ")";
            cx_.error(cx_.at(*n), child(k), message);
            return std::nullopt;
        }
        return x;
    }
    const toml::table* table(std::string_view k) const
    {
        const toml::node* n = table_.get(k);
        return n ? expect<toml::table>(cx_, *n, child(k), "a table") : nullptr;
    }
    const toml::array* array(std::string_view k, std::string_view expected) const
    {
        const toml::node* n = table_.get(k);
        return n ? expect<toml::array>(cx_, *n, child(k), expected) : nullptr;
    }

    // A string, or an array of strings: each element with its key path.
    struct ListItem {
        std::string value;
        Located where;
    };
    std::optional<std::vector<ListItem>> string_list(std::string_view k, std::string_view empty_hint) const
    {
        const toml::node* n = table_.get(k);
        if (!n)
            return std::nullopt;
        const size_t src = cx_.doc().index;
        if (auto* s = n->as_string())
            return std::vector<ListItem>{{s->get(), {src, cx_.at(*n), child(k)}}};
        auto* arr = expect<toml::array>(cx_, *n, child(k), "a string or an array of strings");
        if (!arr)
            return std::nullopt;
        if (arr->empty()) {
            cx_.error(cx_.at(*n), child(k), "empty list; " + std::string(empty_hint));
            return std::nullopt;
        }
        std::vector<ListItem> items;
        bool ok = true;
        for (size_t i = 0; i < arr->size(); i++) {
            const std::string path = child(k) + "[" + std::to_string(i) + "]";
            const toml::node& e = *arr->get(i);
            if (auto* s = expect<std::string>(cx_, e, path, "a string"))
                items.push_back({s->get(), {src, cx_.at(e), path}});
            else
                ok = false;
        }
        return ok ? std::optional(std::move(items)) : std::nullopt;
    }

    // The elements of an array of tables (`[[x]]` or `[{...}, {...}]`).
    std::vector<const toml::table*> tables(std::string_view k, std::string_view expected) const
    {
        std::vector<const toml::table*> out;
        const toml::array* arr = array(k, expected);
        if (!arr)
            return out;
        for (size_t i = 0; i < arr->size(); i++) {
            const toml::node& e = *arr->get(i);
            if (auto* t = expect<toml::table>(cx_, e, child(k) + "[" + std::to_string(i) + "]", "a table"))
                out.push_back(t);
            else
                out.push_back(nullptr);
        }
        return out;
    }

private:
    const FileContext& cx_;
    const toml::table& table_;
    std::string path_;
    std::vector<std::string> allowed_;
};

// `listener "web"` when the table has a usable name, `listener[2]` otherwise
// (index within its file, from 0).
std::string entity_path(std::string_view kind, size_t index, const toml::table& t)
{
    if (auto* n = t.get("name"); n && n->is_string() && !check_name(n->as_string()->get()))
        return std::string(kind) + " \"" + n->as_string()->get() + "\"";
    return std::string(kind) + "[" + std::to_string(index) + "]";
}

// ---- drafts: what each file says, with where it says it ----------------------

struct NamedDraft {
    std::optional<std::string> name;  // set when present and valid
    Located name_at;
    Located where;  // the entity's table
};

struct ListenerDraft : NamedDraft {
    std::optional<SocketAddress> address;
    Located address_at;
};

struct ClusterDraft : NamedDraft {
    Cluster value;
    std::vector<Located> endpoint_at;  // parallel to value.endpoints
};

struct Reference {
    std::string name;
    Located at;
};

struct RouteDraft : NamedDraft {
    Route value;
    std::vector<Reference> listener_refs;
    std::vector<Reference> cluster_refs;  // parallel to value.clusters
};

struct Drafts {
    std::optional<DaemonSettings> daemon;
    std::vector<ListenerDraft> listeners;
    std::vector<ClusterDraft> clusters;
    std::vector<RouteDraft> routes;
};

void read_name(const TableReader& r, std::string_view what, NamedDraft& d)
{
    d.where = {r.context().doc().index, r.where(), r.path()};
    d.name_at = r.located("name");
    auto name = r.required_string("name", "every " + std::string(what) + " needs a unique name");
    if (!name)
        return;
    if (auto why = check_name(*name)) {
        r.error("name", *why);
        return;
    }
    d.name = std::move(*name);
}

// ---- [daemon] ---------------------------------------------------------------------

void read_daemon(const FileContext& cx, const toml::table& t, DaemonSettings& s)
{
    TableReader r(cx, t, "daemon",
                  {"cgroup", "bpffs", "ingress_budget", "kernel_dataplane", "offload_remote_clients",
                   "pool_min_idle", "pool_max", "connect_timeout_ms", "request_timeout_ms",
                   "header_timeout_ms", "idle_timeout_ms", "log_level"});
    for (auto [key, target] : {std::pair{"cgroup", &s.cgroup}, std::pair{"bpffs", &s.bpffs}}) {
        if (auto v = r.string(key)) {
            if (auto why = check_absolute_path(*v))
                r.error(key, *why);
            else
                *target = *v;
        }
    }
    if (auto v = r.integer("ingress_budget", kMinIngressBudget, UINT32_MAX,
                           "bytes; smaller budgets would send most responses over TCP"))
        s.ingress_budget = static_cast<uint32_t>(*v);
    if (auto v = r.boolean("kernel_dataplane"))
        s.kernel_dataplane = *v;
    if (auto v = r.boolean("offload_remote_clients"))
        s.offload_remote_clients = *v;
    if (auto v = r.integer("pool_max", 1, L7_SLOTS_PER_POOL,
                           "pooled connections per endpoint; the data plane has " +
                               std::to_string(L7_SLOTS_PER_POOL) + " slots per pool"))
        s.pool_max = static_cast<uint32_t>(*v);
    if (auto v = r.integer("pool_min_idle", 0, L7_SLOTS_PER_POOL)) {
        if (static_cast<uint32_t>(*v) > s.pool_max)
            r.error("pool_min_idle", std::to_string(*v) + " is more than pool_max (" +
                                         std::to_string(s.pool_max) + ")");
        else
            s.pool_min_idle = static_cast<uint32_t>(*v);
    }
    for (auto [key, target] : {std::pair{"connect_timeout_ms", &s.connect_timeout},
                               std::pair{"request_timeout_ms", &s.request_timeout},
                               std::pair{"header_timeout_ms", &s.header_timeout},
                               std::pair{"idle_timeout_ms", &s.idle_timeout}}) {
        if (auto v = r.integer(key, 1, kMaxTimeoutMs, "milliseconds, at most one day"))
            *target = std::chrono::milliseconds(*v);
    }
    if (auto v = r.string("log_level")) {
        log::Level level;
        if (!log::parse_level(*v, &level))
            r.error("log_level", quote(*v) + " is not a log level; use \"error\", \"warning\", "
                                              "\"notice\", \"info\" or \"debug\"");
        else
            s.log_level = *v;
    }
}

// ---- [[listener]] -------------------------------------------------------------------

void read_listener(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("listener", index, t), {"name", "address"});
    ListenerDraft d;
    read_name(r, "listener", d);
    d.address_at = r.located("address");
    if (auto text = r.required_string("address", "give the address to listen on, e.g. \"127.0.0.1:8080\"")) {
        std::string why;
        if (auto a = SocketAddress::parse(*text, &why))
            d.address = *a;
        else
            r.error("address", why);
    }
    out.listeners.push_back(std::move(d));
}

// ---- [[cluster]] -------------------------------------------------------------------

void read_cluster(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("cluster", index, t), {"name", "lb", "endpoints"});
    ClusterDraft d;
    read_name(r, "cluster", d);
    d.value.where = r.where();
    bool lb_known = true;
    if (auto lb = r.string("lb")) {
        if (*lb == "round_robin")
            d.value.lb = LbPolicy::RoundRobin;
        else if (*lb == "weighted")
            d.value.lb = LbPolicy::Weighted;
        else {
            r.error("lb", quote(*lb) + " is not a load-balancing policy; use \"round_robin\" or \"weighted\"");
            lb_known = false;
        }
    } else if (r.has("lb")) {
        lb_known = false;
    }

    if (!r.has("endpoints")) {
        r.missing("endpoints", "a cluster needs at least one endpoint, e.g. [ { address = \"127.0.0.1:9001\" } ]");
    } else if (const toml::array* arr = r.array("endpoints", "an array of endpoint tables")) {
        if (arr->empty())
            r.error("endpoints", "empty; a cluster needs at least one endpoint");
        const std::vector<const toml::table*> eps = r.tables("endpoints", "an array of endpoint tables");
        std::map<SocketAddress, size_t> seen;
        int64_t weight_sum = 0;
        for (size_t i = 0; i < eps.size(); i++) {
            if (!eps[i])
                continue;
            TableReader er(cx, *eps[i], r.child("endpoints") + "[" + std::to_string(i) + "]",
                           {"address", "weight"});
            Endpoint ep;
            if (er.has("weight") && lb_known && d.value.lb == LbPolicy::RoundRobin)
                er.error("weight", "weights need lb = \"weighted\" (this cluster is round_robin)");
            else if (auto w = er.integer("weight", 0, kMaxWeight))
                ep.weight = static_cast<uint32_t>(*w);
            weight_sum += ep.weight;
            auto text = er.required_string("address", "give the backend's \"ip:port\"");
            if (!text)
                continue;
            std::string why;
            auto a = SocketAddress::parse(*text, &why);
            if (!a) {
                er.error("address", why);
                continue;
            }
            if (a->is_wildcard()) {
                er.error("address", a->str() + " is a wildcard address; an endpoint needs the address "
                                               "to connect to, e.g. 127.0.0.1");
                continue;
            }
            if (auto [it, fresh] = seen.emplace(*a, i); !fresh) {
                er.error("address", a->str() + " is listed twice in this cluster (also endpoints[" +
                                        std::to_string(it->second) + "]); use weights instead");
                continue;
            }
            ep.address = *a;
            d.value.endpoints.push_back(ep);
            d.endpoint_at.push_back(er.located("address"));
        }
        if (lb_known && d.value.lb == LbPolicy::Weighted && !arr->empty() &&
            (weight_sum < 1 || weight_sum > kMaxWeightSum))
            r.error("endpoints", "the endpoint weights sum to " + std::to_string(weight_sum) +
                                     "; the sum must be in 1.." + std::to_string(kMaxWeightSum));
    }
    out.clusters.push_back(std::move(d));
}

// ---- [[route]] ------------------------------------------------------------------------

void read_match(const TableReader& route, const toml::table& t, RouteMatch& m)
{
    const FileContext& cx = route.context();
    TableReader r(cx, t, route.child("match"),
                  {"method", "host", "path_exact", "path_prefix", "headers"});

    if (auto methods = r.string_list("method", "omit \"method\" to match any method")) {
        for (const auto& item : *methods) {
            if (auto why = check_method(item.value)) {
                cx.error(item.where.at, item.where.key, *why);
                continue;
            }
            if (std::find(m.methods.begin(), m.methods.end(), item.value) == m.methods.end())
                m.methods.push_back(item.value);
        }
    }
    if (auto host = r.string("host")) {
        std::string why;
        if (auto h = normalize_host(*host, &why))
            m.host = std::move(*h);
        else
            r.error("host", why);
    }
    for (auto [key, kind] : {std::pair{"path_exact", PathMatch::Exact}, std::pair{"path_prefix", PathMatch::Prefix}}) {
        auto path = r.string(key);
        if (!path)
            continue;
        if (r.has("path_exact") && r.has("path_prefix") && kind == PathMatch::Prefix) {
            r.error(key, "give at most one of \"path_exact\" and \"path_prefix\"");
            continue;
        }
        if (auto why = check_path(*path)) {
            r.error(key, *why);
            continue;
        }
        m.path_kind = kind;
        m.path = std::move(*path);
    }

    const std::vector<const toml::table*> headers = r.tables("headers", "an array of header tables");
    if (r.is_empty_array("headers"))
        r.error("headers", "empty list; omit \"headers\" to match any headers");
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < headers.size(); i++) {
        if (!headers[i])
            continue;
        TableReader hr(cx, *headers[i], r.child("headers") + "[" + std::to_string(i) + "]",
                       {"name", "exact", "present"});
        HeaderCondition c;
        bool ok = true;
        if (auto name = hr.required_string("name", "give the header's field name, e.g. \"x-canary\"")) {
            if (!is_token(*name)) {
                hr.error("name", quote(*name) + " is not a header field name (RFC 9110 token: letters, "
                                                 "digits and !#$%&'*+-.^_`|~)");
                ok = false;
            } else if (auto [it, fresh] = seen.emplace(lower(*name), i); !fresh) {
                hr.error("name", "header " + quote(lower(*name)) + " already has a condition in headers[" +
                                     std::to_string(it->second) + "]; a route takes one condition per header");
                ok = false;
            } else {
                c.name = lower(*name);
            }
        } else {
            ok = false;
        }
        const bool has_exact = hr.has("exact");
        const bool has_present = hr.has("present");
        if (has_exact && has_present) {
            hr.error("present", "give either \"exact\" or \"present\", not both");
            ok = false;
        } else if (!has_exact && !has_present) {
            hr.error_here("needs exactly one of \"exact\" (a value) or \"present = true\"");
            ok = false;
        } else if (has_present) {
            auto present = hr.boolean("present");
            if (present && !*present) {
                hr.error("present", "present = false (match when the header is absent) is not supported; "
                                    "put an earlier route with present = true instead");
                ok = false;
            } else if (!present) {
                ok = false;
            }
            c.kind = HeaderCondition::Kind::Present;
        } else if (auto value = hr.string("exact")) {
            if (auto why = check_header_value(*value)) {
                hr.error("exact", *why);
                ok = false;
            }
            c.kind = HeaderCondition::Kind::Exact;
            c.value = std::move(*value);
        } else {
            ok = false;
        }
        if (ok)
            m.headers.push_back(std::move(c));
    }
}

void read_route(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("route", index, t),
                  {"name", "listeners", "offload", "cluster", "clusters", "match"});
    RouteDraft d;
    read_name(r, "route", d);
    if (d.name)
        d.value.name = *d.name;
    d.value.where = r.where();

    if (auto listeners = r.string_list("listeners", "omit \"listeners\" to use every listener")) {
        for (auto& item : *listeners) {
            if (std::find(d.value.listeners.begin(), d.value.listeners.end(), item.value) != d.value.listeners.end())
                continue;
            d.value.listeners.push_back(item.value);
            d.listener_refs.push_back({item.value, item.where});
        }
    }
    if (auto offload = r.boolean("offload"))
        d.value.offload = *offload;

    if (r.has("cluster") && r.has("clusters")) {
        r.error("clusters", "give either \"cluster\" or \"clusters\", not both");
    } else if (r.has("cluster")) {
        if (auto name = r.string("cluster")) {
            d.value.clusters.push_back({*name, 1});
            d.cluster_refs.push_back({*name, r.located("cluster")});
        }
    } else if (r.has("clusters")) {
        const std::vector<const toml::table*> targets = r.tables("clusters", "an array of { name, weight } tables");
        if (r.is_empty_array("clusters"))
            r.error("clusters", "empty list; a route needs at least one cluster");
        int64_t weight_sum = 0;
        bool weights_ok = true;
        for (size_t i = 0; i < targets.size(); i++) {
            if (!targets[i]) {
                weights_ok = false;
                continue;
            }
            TableReader tr(cx, *targets[i], r.child("clusters") + "[" + std::to_string(i) + "]",
                           {"name", "weight"});
            WeightedCluster wc;
            if (auto w = tr.integer("weight", 0, kMaxWeight))
                wc.weight = static_cast<uint32_t>(*w);
            else if (tr.has("weight"))
                weights_ok = false;
            weight_sum += wc.weight;
            auto name = tr.required_string("name", "give the cluster's name");
            if (!name)
                continue;
            const bool duplicate = std::any_of(d.value.clusters.begin(), d.value.clusters.end(),
                                               [&](const WeightedCluster& x) { return x.cluster == *name; });
            if (duplicate) {
                tr.error("name", "cluster " + quote(*name) + " is listed twice; give it one entry with the summed weight");
                continue;
            }
            wc.cluster = *name;
            d.value.clusters.push_back(wc);
            d.cluster_refs.push_back({*name, tr.located("name")});
        }
        if (weights_ok && !targets.empty() && (weight_sum < 1 || weight_sum > kMaxWeightSum))
            r.error("clusters", "the cluster weights sum to " + std::to_string(weight_sum) +
                                    "; the sum must be in 1.." + std::to_string(kMaxWeightSum));
    } else {
        r.missing("cluster", "a route needs \"cluster\" (one cluster) or \"clusters\" (weighted)");
    }

    if (const toml::table* match = r.table("match"))
        read_match(r, *match, d.value.match);
    out.routes.push_back(std::move(d));
}

// ---- one file ---------------------------------------------------------------------

void read_document(const FileContext& cx, Drafts& out)
{
    const toml::table& root = cx.doc().root;
    TableReader r(cx, root, "", {"daemon", "listener", "cluster", "route"});

    if (const toml::node* daemon = root.get("daemon")) {
        if (cx.doc().index != 0) {
            auto key = std::find_if(root.begin(), root.end(), [](auto&& kv) { return kv.first.str() == "daemon"; });
            cx.error(cx.at(key->first), "daemon",
                     "[daemon] is only allowed in the main policy file; move these settings there");
        } else if (auto* t = expect<toml::table>(cx, *daemon, "daemon", "a table ([daemon])")) {
            DaemonSettings s;
            read_daemon(cx, *t, s);
            out.daemon = s;
        }
    }
    using Reader = void (*)(const FileContext&, const toml::table&, size_t, Drafts&);
    for (auto [key, read] : {std::pair<const char*, Reader>{"listener", read_listener},
                             std::pair<const char*, Reader>{"cluster", read_cluster},
                             std::pair<const char*, Reader>{"route", read_route}}) {
        const std::string expected = "an array of tables ([[" + std::string(key) + "]])";
        const std::vector<const toml::table*> tables = r.tables(key, expected);
        for (size_t i = 0; i < tables.size(); i++)
            if (tables[i])
                read(cx, *tables[i], i, out);
    }
}

// ---- the whole policy ----------------------------------------------------------

class PolicyAssembler {
public:
    explicit PolicyAssembler(ErrorSink& sink) : sink_(sink) {}

    void add(Drafts&& d)
    {
        if (d.daemon)
            daemon_ = *d.daemon;
        for (auto& x : d.listeners)
            listeners_.push_back(std::move(x));
        for (auto& x : d.clusters)
            clusters_.push_back(std::move(x));
        for (auto& x : d.routes)
            routes_.push_back(std::move(x));
    }

    // Cross-file rules: unique names and addresses, references, loops.
    // `complete`: every file parsed (otherwise what is missing may just be in
    // the part that did not parse).
    Policy assemble(const std::vector<std::string>& sources, bool complete)
    {
        const auto listener_names = unique_names(listeners_, "listener");
        const auto cluster_names = unique_names(clusters_, "cluster");
        unique_names(routes_, "route");
        check_listener_addresses();
        check_endpoint_loops();
        if (complete) {
            for (const RouteDraft& r : routes_) {
                for (const Reference& ref : r.listener_refs)
                    resolve(ref, listener_names, "listener");
                for (const Reference& ref : r.cluster_refs)
                    resolve(ref, cluster_names, "cluster");
            }
            if (listeners_.empty() && !sources.empty())
                sink_.add(0, {sources.front(), 1, 1}, "listener",
                          "the policy defines no listener; add a [[listener]] with a name and an address");
        }

        Policy p;
        p.daemon = daemon_;
        p.sources = sources;
        for (const ListenerDraft& l : listeners_)
            p.listeners.push_back({l.name.value_or(""), l.address.value_or(SocketAddress{}), l.where.at});
        for (ClusterDraft& c : clusters_) {
            c.value.name = c.name.value_or("");
            p.clusters.push_back(std::move(c.value));
        }
        for (RouteDraft& r : routes_)
            p.routes.push_back(std::move(r.value));
        return p;
    }

private:
    void error(const Located& at, std::string message) { sink_.add(at.source, at.at, at.key, std::move(message)); }

    template <class Draft>
    std::unordered_map<std::string, const Draft*> unique_names(const std::vector<Draft>& drafts, std::string_view kind)
    {
        std::unordered_map<std::string, const Draft*> names;
        for (const Draft& d : drafts) {
            if (!d.name)
                continue;
            auto [it, fresh] = names.emplace(*d.name, &d);
            if (!fresh)
                error(d.name_at, std::string(kind) + " name " + quote(*d.name) + " is already used at " +
                                     it->second->name_at.at.str() + "; names must be unique across all files");
        }
        return names;
    }

    template <class Draft>
    void resolve(const Reference& ref, const std::unordered_map<std::string, const Draft*>& names,
                 std::string_view kind)
    {
        if (names.count(ref.name))
            return;
        std::vector<std::string> known;
        for (const auto& [name, d] : names)
            known.push_back(name);
        std::sort(known.begin(), known.end());
        std::string message = "no " + std::string(kind) + " named " + quote(ref.name);
        if (auto guess = closest(ref.name, known))
            message += " (did you mean \"" + *guess + "\"?)";
        else if (!known.empty())
            message += "; defined: " + joined(known);
        error(ref.at, message);
    }

    static std::string label(const ListenerDraft& l)
    {
        return l.name ? "listener " + quote(*l.name) : "listener at " + l.where.at.str();
    }

    // Two sockets cannot listen on one address; a wildcard takes every
    // address of its family on that port. The later listener (in load order)
    // is the one reported: it is the one that was just added.
    void check_listener_addresses()
    {
        std::map<std::pair<int, uint16_t>, const ListenerDraft*> specific;
        for (const ListenerDraft& l : listeners_) {
            if (!l.address)
                continue;
            auto [it, fresh] = by_address_.emplace(*l.address, &l);
            if (!fresh) {
                error(l.address_at, l.address->str() + " is already used by " + label(*it->second) + " (" +
                                        it->second->address_at.at.str() + ")");
                continue;
            }
            const std::pair<int, uint16_t> port{l.address->family, l.address->port};
            if (l.address->is_wildcard()) {
                if (auto s = specific.find(port); s != specific.end())
                    error(l.address_at, l.address->str() + " takes every address on port " +
                                            std::to_string(port.second) + ", including that of " +
                                            label(*s->second) + " on " + s->second->address->str() + " (" +
                                            s->second->address_at.at.str() + ")");
                wildcard_.emplace(port, &l);
            } else {
                if (auto w = wildcard_.find(port); w != wildcard_.end())
                    error(l.address_at, l.address->str() + " overlaps " + label(*w->second) + " on " +
                                            w->second->address->str() + " (" + w->second->address_at.at.str() +
                                            "), which already takes every address on port " +
                                            std::to_string(port.second));
                specific.emplace(port, &l);
            }
        }
    }

    // An endpoint that is one of our own listeners sends requests back into
    // l7fast forever.
    void check_endpoint_loops()
    {
        for (const ClusterDraft& c : clusters_) {
            for (size_t i = 0; i < c.value.endpoints.size(); i++) {
                const SocketAddress& a = c.value.endpoints[i].address;
                const ListenerDraft* l = nullptr;
                if (auto it = by_address_.find(a); it != by_address_.end())
                    l = it->second;
                else if (auto w = wildcard_.find({a.family, a.port}); w != wildcard_.end() && is_loopback(a))
                    l = w->second;
                if (l)
                    error(c.endpoint_at[i], a.str() + " is the address of " + label(*l) + " (" +
                                                l->address_at.at.str() +
                                                "): requests would loop through l7fast; point the endpoint "
                                                "at the backend itself");
            }
        }
    }

    ErrorSink& sink_;
    DaemonSettings daemon_;
    std::vector<ListenerDraft> listeners_;
    std::vector<ClusterDraft> clusters_;
    std::vector<RouteDraft> routes_;
    std::map<SocketAddress, const ListenerDraft*> by_address_;
    std::map<std::pair<int, uint16_t>, const ListenerDraft*> wildcard_;
};

// ---- files ---------------------------------------------------------------------

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The file's bytes, or an error message naming errno's text.
std::optional<std::string> read_file(const std::filesystem::path& path, std::string* why)
{
    File f(std::fopen(path.c_str(), "rbe"));
    if (!f) {
        *why = std::string("cannot read: ") + std::strerror(errno);
        return std::nullopt;
    }
    struct stat st {};
    if (fstat(fileno(f.get()), &st) != 0) {
        *why = std::string("cannot read: ") + std::strerror(errno);
        return std::nullopt;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = "cannot read: not a regular file";
        return std::nullopt;
    }
    std::string text;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) {
        text.append(buf, n);
        if (text.size() > PolicyLoader::kMaxFileBytes) {
            *why = "larger than " + std::to_string(PolicyLoader::kMaxFileBytes >> 20) + " MiB; refusing to parse it";
            return std::nullopt;
        }
    }
    if (std::ferror(f.get())) {
        *why = std::string("cannot read: ") + std::strerror(errno);
        return std::nullopt;
    }
    return text;
}

PolicyLoadResult load_sources_unguarded(std::span<const PolicySource> sources, ErrorSink& sink)
{
    PolicyAssembler assembler(sink);
    std::vector<std::string> names;
    bool complete = true;
    for (size_t i = 0; i < sources.size(); i++) {
        names.push_back(sources[i].filename);
        Document doc;
        doc.index = i;
        doc.file = sources[i].filename;
        try {
            doc.root = toml::parse(sources[i].text, sources[i].filename);
        } catch (const toml::parse_error& e) {
            sink.add(i, {doc.file, e.source().begin.line, e.source().begin.column}, "",
                     "TOML syntax error: " + std::string(e.description()));
            complete = false;
            continue;
        }
        Drafts drafts;
        read_document(FileContext(doc, sink), drafts);
        assembler.add(std::move(drafts));
    }
    Policy policy = assembler.assemble(names, complete);
    if (!sink.empty())
        return PolicyLoadResult(sink.take());
    return PolicyLoadResult(std::move(policy));
}

// Nothing escapes: a reload must fail with a message, never crash the daemon.
template <class F>
PolicyLoadResult guarded(const std::string& file, F&& body)
{
    try {
        return body();
    } catch (const std::exception& e) {
        return PolicyLoadResult(std::vector<PolicyError>{{file, 0, 0, "", std::string("internal error: ") + e.what()}});
    } catch (...) {
        return PolicyLoadResult(std::vector<PolicyError>{{file, 0, 0, "", "internal error"}});
    }
}

}  // namespace

PolicyLoadResult PolicyLoader::load_sources(std::span<const PolicySource> sources)
{
    return guarded(sources.empty() ? "" : sources.front().filename, [&] {
        ErrorSink sink;
        return load_sources_unguarded(sources, sink);
    });
}

PolicyLoadResult PolicyLoader::load_string(std::string_view text, const std::string& pseudo_filename)
{
    return guarded(pseudo_filename, [&] {
        const PolicySource source{pseudo_filename, std::string(text)};
        return load_sources(std::span(&source, 1));
    });
}

PolicyLoadResult PolicyLoader::load(const std::filesystem::path& main_file,
                                    const std::filesystem::path& dropin_dir)
{
    return guarded(main_file.string(), [&] {
        std::vector<std::filesystem::path> files{main_file};
        std::vector<PolicyError> errors;
        if (!dropin_dir.empty()) {
            std::error_code ec;
            std::filesystem::directory_iterator it(dropin_dir, ec);
            if (ec && ec != std::errc::no_such_file_or_directory) {
                errors.push_back({dropin_dir.string(), 0, 0, "", "cannot read drop-in directory: " + ec.message()});
            } else if (!ec) {
                std::vector<std::string> names;
                for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
                    const std::string name = it->path().filename().string();
                    if (name.size() > 5 && name.front() != '.' && name.ends_with(".toml"))
                        names.push_back(name);
                }
                if (ec)
                    errors.push_back({dropin_dir.string(), 0, 0, "", "cannot read drop-in directory: " + ec.message()});
                std::sort(names.begin(), names.end());  // std::string compares bytes
                for (const std::string& n : names)
                    files.push_back(dropin_dir / n);
            }
        }
        std::vector<PolicySource> sources;
        for (const auto& f : files) {
            std::string why;
            if (auto text = read_file(f, &why))
                sources.push_back({f.string(), std::move(*text)});
            else
                errors.push_back({f.string(), 0, 0, "", why});
        }
        if (!errors.empty())
            return PolicyLoadResult(std::move(errors));
        return load_sources(sources);
    });
}

}  // namespace l7fast::policy
