#include "proxy/Prepare.hpp"

#include <unistd.h>

#include <cerrno>
#include <set>
#include <string>

#include "dataplane/Abi.hpp"
#include "proxy/Pipeline.hpp"

namespace l7fast::proxy {

std::shared_ptr<PolicyRuntime> prepare_runtime(policy::Policy pol, const PolicyRuntime* previous,
                                               std::optional<policy::PolicyError>* error,
                                               const BucketSource& buckets)
{
    // every distinct upstream address is a pool (UpstreamPool::pool_id_for)
    std::set<policy::SocketAddress> addresses;
    for (const auto& c : pol.clusters)
        for (const auto& e : c.endpoints) {
            addresses.insert(e.address);
            if (addresses.size() > L7_MAX_POOLS) {
                *error = policy::PolicyError{c.where.file, c.where.line, c.where.column,
                                             "cluster \"" + c.name + "\"",
                                             "more than " + std::to_string(L7_MAX_POOLS) +
                                                 " distinct upstream addresses: reduce the endpoints"};
                return nullptr;
            }
        }
    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(std::move(pol));
    // JWT verifiers (keys and JWKS files), hash tables, rate limiters: a key
    // set that does not load fails here, not the requests
    if (auto e = build_pipeline_state(*rt, previous, buckets)) {
        *error = std::move(e);
        return nullptr;
    }
    return rt;
}

policy::PolicyLoadResult check_policy_files(const std::filesystem::path& file,
                                            const std::filesystem::path& dropins,
                                            std::vector<std::string>* warnings)
{
    policy::PolicyLoadResult result = policy::PolicyLoader::load(file, dropins);
    if (!result.ok())
        return result;
    for (const auto& p : result.policy().jwt_providers)
        if (!p.jwks_file.empty() && ::access(p.jwks_file.c_str(), R_OK) != 0 && errno == EACCES) {
            warnings->push_back(p.where.str() + ": jwt_provider \"" + p.name + "\": " + p.jwks_file +
                                " is not readable by this user, so the key sets and what follows them "
                                "were not checked: run the check as root (sudo l7fastctl check) to check "
                                "what a reload checks");
            return result;
        }
    std::optional<policy::PolicyError> error;
    if (!prepare_runtime(result.policy(), nullptr, &error))
        return policy::PolicyLoadResult(std::vector<policy::PolicyError>{std::move(*error)});
    return result;
}

}  // namespace l7fast::proxy
