// What the policy loader's files share beyond the TOML reader
// (LoaderToml.hpp), the value checks (LoaderChecks.hpp) and the limits
// (LoaderLimits.hpp): the drafts a file's tables are read into, and the
// readers of its sections. The loader's files:
//   PolicyLoader.cpp         the files, each file's top level, the whole policy
//                            across files (unique names, references, addresses)
//   LoaderToml.cpp           the TOML reader and the error sink
//   LoaderChecks.cpp         the values of the format, one at a time
//   LoadCommon.cpp           an entity's name and key path, request keys
//   LoadDaemonListeners.cpp  [daemon] and [[listener]]
//   LoadClusters.cpp         [[cluster]], its health_check and outlier_detection
//   LoadRoutes.cpp           [[route]]: targets, actions, RBAC, rate limit
//   LoadRouteMatch.cpp       the conditions of [route.match] and of RBAC rules
//   LoadJwt.cpp              [[jwt_provider]]
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "loader/LoaderToml.hpp"
#include "config/Policy.hpp"

namespace l7fast::policy::loader {

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
    std::optional<Reference> jwt_ref;
};

struct JwtProviderDraft : NamedDraft {
    JwtProvider value;
};

struct Drafts {
    std::optional<DaemonSettings> daemon;
    std::optional<Located> metrics_at;  // daemon.metrics_address
    std::vector<ListenerDraft> listeners;
    std::vector<ClusterDraft> clusters;
    std::vector<RouteDraft> routes;
    std::vector<JwtProviderDraft> jwt_providers;
};

// ---- shared by the section readers (LoadCommon.cpp) -----------------------------

// `listener "web"` when the table has a usable name, `listener[2]` otherwise
// (index within its file, from 0).
std::string entity_path(std::string_view kind, size_t index, const toml::table& t);
// Where the entity is, and its `name` (set only when valid; a missing or
// invalid one is reported).
void read_name(const TableReader& r, std::string_view what, NamedDraft& d);
// `{ header = "x" }`, `{ cookie = "c" }`, `{ source_ip = true }` or (rate
// limits) `{ claim = "sub" }`.
std::optional<RequestKey> read_request_key(const TableReader& parent, std::string_view k, bool claims_allowed,
                                           std::optional<Located>* claim_at = nullptr);

// ---- the sections, one table each; read_document (PolicyLoader.cpp) calls them ----

void read_daemon(const FileContext& cx, const toml::table& t, DaemonSettings& s, Drafts& out);
void read_listener(const FileContext& cx, const toml::table& t, size_t index, Drafts& out);
void read_cluster(const FileContext& cx, const toml::table& t, size_t index, Drafts& out);
void read_route(const FileContext& cx, const toml::table& t, size_t index, Drafts& out);
void read_jwt_provider(const FileContext& cx, const toml::table& t, size_t index, Drafts& out);

// ---- parts of [[route]] (LoadRouteMatch.cpp) -------------------------------------

// The conditions of a route's match or of an RBAC rule (`with_host`: route
// matches only). Returns where claim conditions were written, if anywhere:
// they need the route's JWT provider.
std::optional<Located> read_conditions(const TableReader& r, RouteMatch& m, bool with_host);

}  // namespace l7fast::policy::loader
