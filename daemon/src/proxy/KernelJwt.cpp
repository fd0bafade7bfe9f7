#include "proxy/KernelJwt.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "auth/JwtKernel.hpp"
#include "l7fast_abi.h"

namespace l7fast::proxy {

ModuleKeySet module_keys_of(const std::vector<std::shared_ptr<auth::Verifier>>& verifiers)
{
    ModuleKeySet set;
    for (size_t p = 0; p < verifiers.size(); p++) {
        const auto& v = verifiers[p];
        if (!v)
            continue;
        for (const auto* k : v->keys()) {
            uint32_t alg;
            switch (k->alg()) {
            case auth::Alg::HS256:
                alg = L7FAST_ALG_HS256;
                break;
            case auth::Alg::HS384:
                alg = L7FAST_ALG_HS384;
                break;
            case auth::Alg::HS512:
                alg = L7FAST_ALG_HS512;
                break;
            default:
                continue;
            }
            // a key of an algorithm the provider does not accept verifies nothing
            if (v->allows(k->alg())) {
                set.keys.push_back({static_cast<uint32_t>(p), k->kid(), alg, std::string(k->hmac_secret())});
                set.algs.push_back(k->alg());
            }
        }
    }
    return set;
}

static_assert(L7_JA_HS256 == static_cast<int>(auth::Alg::HS256) && L7_JA_HS384 == static_cast<int>(auth::Alg::HS384) &&
                  L7_JA_HS512 == static_cast<int>(auth::Alg::HS512) && L7_JA_RS256 == static_cast<int>(auth::Alg::RS256) &&
                  L7_JA_ES256 == static_cast<int>(auth::Alg::ES256),
              "l7_jwt_alg follows auth::Alg");

namespace {

uint8_t mac_length(auth::Alg alg)
{
    return alg == auth::Alg::HS256 ? 32 : alg == auth::Alg::HS384 ? 48 : 64;
}

// kernel_header_entries' kids (KernelJwt.hpp)
void add_kid_entries(const ModuleKeySet& set, const std::vector<int32_t>& ids,
                     const std::vector<std::shared_ptr<auth::Verifier>>& verifiers, KernelHeaders& out)
{
    constexpr size_t kRoom = L7_JWT_KIDS / 2;
    for (size_t p = 0; p < verifiers.size() && p < L7_MAX_JWT_PROVIDERS; p++) {
        if (!verifiers[p])
            continue;
        const auto keys = verifiers[p]->keys();
        std::vector<std::string_view> kids;
        for (const auto* k : keys)
            kids.push_back(k->kid());
        std::sort(kids.begin(), kids.end());
        kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
        bool complete = true;
        for (const std::string_view kid : kids) {
            // one slot kept for the "all" entry
            if (kid.size() > L7_JWT_MAX_KID || out.kids.size() + 1 >= kRoom) {
                complete = false;
                continue;
            }
            dataplane::JwtKidEntry e;
            e.provider = static_cast<uint32_t>(p);
            e.kid = std::string(kid);
            for (size_t a = 0; a < L7_JA_N; a++) {
                const auto alg = static_cast<auth::Alg>(a);
                const size_t n = static_cast<size_t>(std::count_if(keys.begin(), keys.end(), [&](const auto* k) {
                    return k->kid() == kid && k->alg() == alg;
                }));
                e.verdict[a] = n ? L7_JK_USER : L7_JK_MISMATCH;
                if (!n || a > L7_JA_HS512 || n > L7_JWT_HDR_KEYS)
                    continue;
                l7_jwt_keyset ks{};
                ks.mac_len = mac_length(alg);
                for (size_t j = 0; j < set.keys.size() && j < ids.size(); j++)
                    if (set.keys[j].provider == p && set.keys[j].kid == kid && set.algs[j] == alg && ids[j] >= 0 &&
                        ks.n_keys < L7_JWT_HDR_KEYS)
                        ks.key_id[ks.n_keys++] = static_cast<uint32_t>(ids[j]);
                if (ks.n_keys == n) {
                    e.verdict[a] = L7_JK_VERIFY;
                    e.hs[a] = ks;
                }
            }
            out.kids.push_back(std::move(e));
        }
        if (complete && out.kids.size() < kRoom) {
            dataplane::JwtKidEntry all;
            all.provider = static_cast<uint32_t>(p);
            all.all = true;
            out.kids.push_back(std::move(all));
            out.complete++;
        }
    }
}

}  // namespace

KernelHeaders kernel_header_entries(const ModuleKeySet& set, const std::vector<int32_t>& ids,
                                    const std::vector<std::shared_ptr<auth::Verifier>>& verifiers)
{
    const auto& keys = set.keys;
    KernelHeaders out;
    add_kid_entries(set, ids, verifiers, out);
    std::vector<bool> done(keys.size(), false);
    for (size_t i = 0; i < keys.size(); i++) {
        if (done[i])
            continue;
        std::vector<uint32_t> group_ids;
        bool whole = true;
        for (size_t j = i; j < keys.size(); j++) {
            if (done[j] || keys[j].provider != keys[i].provider || keys[j].kid != keys[i].kid ||
                set.algs[j] != set.algs[i])
                continue;
            done[j] = true;
            if (j >= ids.size() || ids[j] < 0)
                whole = false;
            else
                group_ids.push_back(static_cast<uint32_t>(ids[j]));
        }
        const auth::Verifier* v = keys[i].provider < verifiers.size() ? verifiers[keys[i].provider].get() : nullptr;
        if (!whole || group_ids.size() > L7_JWT_HDR_KEYS || !v) {
            out.skipped++;
            continue;
        }
        const auth::Alg alg = set.algs[i];
        out.groups++;
        for (std::string& seg : auth::kernel_header_segments(*v, alg, keys[i].kid))
            out.entries.push_back({keys[i].provider, std::move(seg), mac_length(alg), group_ids});
    }
    return out;
}

}  // namespace l7fast::proxy
