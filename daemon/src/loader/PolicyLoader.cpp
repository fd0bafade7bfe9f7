// PolicyLoader (PolicyLoader.hpp): reads a policy's files and the top level
// of each (the sections themselves are read by the Load*.cpp files, see
// LoaderInternal.hpp), and assembles the whole policy across files: unique
// names, references between entities, listener addresses, loops.
#include "loader/PolicyLoader.hpp"

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

#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "loader/LoaderToml.hpp"
#include "config/Text.hpp"

namespace l7fast::policy {

std::string PolicyError::str() const
{
    std::string out = file;
    if (line != 0)
        out += ":" + std::to_string(line) + ":" + std::to_string(column);
    if (!out.empty())
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

namespace loader {
namespace {

using text::quote;
using text::closest;

// ---- one file ---------------------------------------------------------------------

void read_document(const FileContext& cx, Drafts& out)
{
    const toml::table& root = cx.doc().root;
    TableReader r(cx, root, "", {"daemon", "listener", "cluster", "route", "jwt_provider"});

    if (const toml::node* daemon = root.get("daemon")) {
        if (cx.doc().index != 0) {
            auto key = std::find_if(root.begin(), root.end(), [](auto&& kv) { return kv.first.str() == "daemon"; });
            cx.error(cx.at(key->first), "daemon",
                     "[daemon] is only allowed in the main policy file; move these settings there");
        } else if (auto* t = expect<toml::table>(cx, *daemon, "daemon", "a table ([daemon])")) {
            DaemonSettings s;
            read_daemon(cx, *t, s, out);
            out.daemon = s;
        }
    }
    using Reader = void (*)(const FileContext&, const toml::table&, size_t, Drafts&);
    for (auto [key, read] : {std::pair<const char*, Reader>{"listener", read_listener},
                             std::pair<const char*, Reader>{"cluster", read_cluster},
                             std::pair<const char*, Reader>{"route", read_route},
                             std::pair<const char*, Reader>{"jwt_provider", read_jwt_provider}}) {
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
        if (d.metrics_at)
            metrics_at_ = *d.metrics_at;
        for (auto& x : d.jwt_providers)
            jwt_providers_.push_back(std::move(x));
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
        const auto provider_names = unique_names(jwt_providers_, "jwt_provider");
        unique_names(routes_, "route");
        check_listener_addresses();
        check_endpoint_loops();
        check_metrics_address();
        if (complete) {
            for (const RouteDraft& r : routes_) {
                for (const Reference& ref : r.listener_refs)
                    resolve(ref, listener_names, "listener");
                for (const Reference& ref : r.cluster_refs)
                    resolve(ref, cluster_names, "cluster");
                if (r.jwt_ref) {
                    if (auto it = provider_names.find(r.jwt_ref->name); it != provider_names.end())
                        check_forwarded_claims(r, *it->second);
                    else
                        resolve(*r.jwt_ref, provider_names, "jwt_provider");
                }
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
        for (JwtProviderDraft& j : jwt_providers_)
            p.jwt_providers.push_back(std::move(j.value));
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

    // The metrics listener is a socket like the others: it cannot share an
    // address with a proxy listener.
    void check_metrics_address()
    {
        if (!daemon_.metrics_address || !metrics_at_)
            return;
        const SocketAddress& m = *daemon_.metrics_address;
        for (const ListenerDraft& l : listeners_) {
            if (!l.address || l.address->family != m.family || l.address->port != m.port)
                continue;
            if (*l.address == m || l.address->is_wildcard() || m.is_wildcard()) {
                error(*metrics_at_, m.str() + " overlaps " + label(l) + " on " + l.address->str() + " (" +
                                        l.address_at.at.str() + "); give the metrics listener its own port");
                return;
            }
        }
    }

    // A forwarded claim header is written by the provider; the route's own
    // request_headers changing the same name would make the result depend
    // on an order nobody wrote down.
    void check_forwarded_claims(const RouteDraft& r, const JwtProviderDraft& provider)
    {
        const HeaderMutation& m = r.value.request_headers;
        for (const JwtProvider::ForwardClaim& f : provider.value.forward_claims) {
            const bool changed =
                std::find(m.remove.begin(), m.remove.end(), f.header) != m.remove.end() ||
                std::any_of(m.set.begin(), m.set.end(), [&](const HeaderValue& h) { return h.name == f.header; }) ||
                std::any_of(m.add.begin(), m.add.end(), [&](const HeaderValue& h) { return h.name == f.header; });
            if (changed) {
                error(r.jwt_ref->at, "jwt_provider " + quote(provider.value.name) + " forwards claim " +
                                         quote(f.claim) + " in header " + quote(f.header) +
                                         ", which this route's request_headers also changes; use another header");
                return;
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
    std::vector<JwtProviderDraft> jwt_providers_;
    std::optional<Located> metrics_at_;
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
        doc.text = sources[i].text;
        doc.line_starts.push_back(0);
        for (size_t at = doc.text.find('\n'); at != std::string_view::npos; at = doc.text.find('\n', at + 1))
            doc.line_starts.push_back(at + 1);
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
}  // namespace loader

PolicyLoadResult PolicyLoader::load_sources(std::span<const PolicySource> sources)
{
    return loader::guarded(sources.empty() ? "" : sources.front().filename, [&] {
        loader::ErrorSink sink;
        return loader::load_sources_unguarded(sources, sink);
    });
}

PolicyLoadResult PolicyLoader::load_string(std::string_view text, const std::string& pseudo_filename)
{
    return loader::guarded(pseudo_filename, [&] {
        const PolicySource source{pseudo_filename, std::string(text)};
        return load_sources(std::span(&source, 1));
    });
}

PolicyLoadResult PolicyLoader::load(const std::filesystem::path& main_file,
                                    const std::filesystem::path& dropin_dir)
{
    return loader::guarded(main_file.string(), [&] {
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
            if (auto text = loader::read_file(f, &why))
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