#include "dataplane/Tables.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/KernelHash.hpp"
#include "common/Log.hpp"
#include "dataplane/MapIo.hpp"
#include "compiler/PolicyCompiler.hpp"

namespace l7fast::dataplane {

TableMaps TableMaps::of(const ::bpf_object* obj)
{
    auto fd = [obj](const char* name) {
        const int fd = bpf_object__find_map_fd_by_name(obj, name);
        if (fd < 0)
            throw DataplaneError(std::string("the BPF object has no map ") + name);
        return fd;
    };
    TableMaps m;
    m.bitmaps = fd("l7_bitmaps");
    m.match = fd("l7_match");
    m.routes = fd("l7_routes");
    m.mutations = fd("l7_mutations");
    m.responses = fd("l7_responses");
    m.lb_tables = fd("l7_lb_tables");
    m.clusters = fd("l7_clusters");
    m.endpoints = fd("l7_endpoints");
    m.listeners = fd("l7_listeners");
    m.jwt_providers = fd("l7_jwt_providers");
    m.jwt_headers = fd("l7_jwt_headers");
    m.jwt_kids = fd("l7_jwt_kids");
    return m;
}

void TableWriter::delete_jwt_gen(int fd, const char* name, std::optional<uint32_t> gen)
{
    for (const auto& k : map_keys<l7_jwt_key>(fd))
        if ((!gen || k.gen == *gen) && bpf_map_delete_elem(fd, &k) != 0 && errno != ENOENT)
            throw DataplaneError(std::string("deleting from ") + name + ": " + errstr(errno));
}

size_t TableWriter::write_jwt_headers(uint32_t gen, uint64_t seed, uint32_t epoch,
                                      const std::vector<JwtHeaderEntry>& headers)
{
    gen &= 1;
    delete_jwt_gen(maps_.jwt_headers, "l7_jwt_headers", gen);
    size_t written = 0;
    for (const JwtHeaderEntry& h : headers) {
        if (h.segment.empty() || h.segment.size() > L7_JWT_MAX_HDR || h.provider >= L7_MAX_JWT_PROVIDERS)
            continue;
        if (h.key_ids.empty() || h.key_ids.size() > L7_JWT_HDR_KEYS ||
            (h.mac_len != 32 && h.mac_len != 48 && h.mac_len != 64))
            continue;
        l7_jwt_key k{};
        k.hash = policy::kernel::match_hash(seed, h.segment, false);
        k.gen = static_cast<__u16>(gen);
        k.provider = static_cast<__u16>(h.provider);
        k.len = static_cast<__u32>(h.segment.size());
        l7_jwt_hdr v{};
        v.epoch = epoch;
        v.len = static_cast<__u16>(h.segment.size());
        v.mac_len = h.mac_len;
        v.n_keys = static_cast<__u8>(h.key_ids.size());
        for (size_t i = 0; i < h.key_ids.size(); i++)
            v.key_id[i] = h.key_ids[i];
        std::memcpy(v.seg, h.segment.data(), h.segment.size());
        if (bpf_map_update_elem(maps_.jwt_headers, &k, &v, BPF_ANY) == 0)
            written++;
        else
            log::warning("l7_jwt_headers: cannot add a header of JWT provider ", h.provider, ": ", errstr(errno),
                         " (its tokens go to user space)");
    }
    return written;
}

void TableWriter::delete_kids_gen(int fd, std::optional<uint32_t> gen)
{
    auto keys = map_keys<l7_jwt_kid_key>(fd);
    std::stable_partition(keys.begin(), keys.end(), [](const l7_jwt_kid_key& k) { return k.len == L7_JWT_KIDS_ALL; });
    for (const auto& k : keys)
        if ((!gen || k.gen == *gen) && bpf_map_delete_elem(fd, &k) != 0 && errno != ENOENT)
            throw DataplaneError("deleting from l7_jwt_kids: " + errstr(errno));
}

size_t TableWriter::write_jwt_kids(uint32_t gen, uint32_t epoch, const std::vector<JwtKidEntry>& kids)
{
    gen &= 1;
    delete_kids_gen(maps_.jwt_kids, gen);
    std::vector<bool> failed(L7_MAX_JWT_PROVIDERS, false);
    size_t written = 0;
    const auto put = [&](const JwtKidEntry& e) {
        l7_jwt_kid_key k{};
        k.gen = static_cast<__u16>(gen);
        k.provider = static_cast<__u16>(e.provider);
        k.len = e.all ? L7_JWT_KIDS_ALL : static_cast<__u16>(e.kid.size());
        std::memcpy(k.word, e.kid.data(), e.all ? 0 : e.kid.size());
        l7_jwt_kid v{};
        v.epoch = epoch;
        for (size_t a = 0; a < L7_JA_N; a++)
            v.verdict[a] = e.verdict[a];
        for (size_t a = 0; a < 3; a++)
            v.hs[a] = e.hs[a];
        if (bpf_map_update_elem(maps_.jwt_kids, &k, &v, BPF_ANY) == 0) {
            written++;
            return true;
        }
        log::warning("l7_jwt_kids: cannot add a kid of JWT provider ", e.provider, ": ", errstr(errno),
                     " (tokens naming a kid the kernel does not find go to user space)");
        return false;
    };
    for (const JwtKidEntry& e : kids)
        if (!e.all && e.provider < L7_MAX_JWT_PROVIDERS && (e.kid.size() > L7_JWT_MAX_KID || !put(e)))
            failed[e.provider] = true;
    for (const JwtKidEntry& e : kids)
        if (e.all && e.provider < L7_MAX_JWT_PROVIDERS && !failed[e.provider])
            put(e);
    return written;
}

void TableWriter::adopt_strings()
{
    for (const auto& k : map_keys<l7_match_key>(maps_.match))
        strings_[k.gen & 1].push_back(k);
}

void TableWriter::write(const policy::CompiledTables& t, std::span<const uint32_t> listener_ids, uint32_t gen)
{
    gen &= 1;
    // route sets; listener sets move from policy order to stable ids
    std::vector<l7_bitmap> bm(L7_BMI_PER_SPACE);
    for (size_t i = 0; i < t.bitmaps.size() && i < bm.size(); i++)
        if (i >= L7_MAX_LISTENERS)
            bm[i] = t.bitmaps[i];
    for (size_t li = 0; li < listener_ids.size() && li < L7_MAX_LISTENERS; li++)
        bm[L7_BMI_LISTENER(listener_ids[li])] = t.bitmaps[L7_BMI_LISTENER(li)];
    for (uint32_t i = 0; i < L7_BMI_PER_SPACE; i++) {
        uint32_t k = L7_BMI_INDEX(gen, L7_SPACE_ROUTES, i);
        update_or_throw(maps_.bitmaps, &k, &bm[i], "l7_bitmaps");
    }
    // RBAC rule sets: no listener sets, nothing to renumber
    for (uint32_t i = 0; i < L7_BMI_PER_SPACE; i++) {
        const l7_bitmap none{};
        uint32_t k = L7_BMI_INDEX(gen, L7_SPACE_RULES, i);
        update_or_throw(maps_.bitmaps, &k, i < t.rule_bitmaps.size() ? &t.rule_bitmaps[i] : &none, "l7_bitmaps");
    }

    for (const auto& k : strings_[gen])
        bpf_map_delete_elem(maps_.match, &k);
    strings_[gen].clear();
    for (auto [k, v] : t.strings) {
        k.gen = static_cast<__u16>(gen);
        if (bpf_map_update_elem(maps_.match, &k, &v, BPF_ANY) != 0)
            throw DataplaneError("updating l7_match: " + errstr(errno) + " (too many string conditions?)");
        strings_[gen].push_back(k);
    }

    for (uint32_t i = 0; i < L7_MAX_ROUTES; i++) {
        l7_route r{};
        if (i < t.routes.size()) {
            r = t.routes[i];
            r.stats_id = gen * L7_MAX_ROUTES + i;
        }
        uint32_t k = gen * L7_MAX_ROUTES + i;
        update_or_throw(maps_.routes, &k, &r, "l7_routes");
    }
    // read only for routes with L7_RF_MUTATE: stale entries are never used
    for (const auto& [route, m] : t.mutations) {
        if (route >= L7_MAX_ROUTES)
            continue;
        uint32_t k = gen * L7_MAX_ROUTES + route;
        update_or_throw(maps_.mutations, &k, &m, "l7_mutations");
    }
    // read only at a route's resp_direct (L7_RF_DIRECT), resp_deny,
    // resp_no_token or resp_bad_token
    for (uint32_t i = 0; i < t.responses.size() && i < L7_MAX_RESPONSES; i++) {
        uint32_t k = gen * L7_MAX_RESPONSES + i;
        update_or_throw(maps_.responses, &k, &t.responses[i], "l7_responses");
    }
    // every provider slot: one the policy no longer has is zeroed
    for (uint32_t i = 0; i < L7_MAX_JWT_PROVIDERS; i++) {
        const l7_jwt_provider p = i < t.jwt_providers.size() ? t.jwt_providers[i] : l7_jwt_provider{};
        uint32_t k = gen * L7_MAX_JWT_PROVIDERS + i;
        update_or_throw(maps_.jwt_providers, &k, &p, "l7_jwt_providers");
    }
    for (uint32_t i = 0; i < t.lb_tables.size() && i < L7_MAX_LB_TABLES; i++) {
        uint32_t k = gen * L7_MAX_LB_TABLES + i;
        update_or_throw(maps_.lb_tables, &k, t.lb_tables[i].get(), "l7_lb_tables");
    }
    for (uint32_t i = 0; i < t.clusters.size() && i < L7_MAX_CLUSTERS; i++) {
        uint32_t k = gen * L7_MAX_CLUSTERS + i;
        update_or_throw(maps_.clusters, &k, &t.clusters[i], "l7_clusters");
    }
    for (uint32_t i = 0; i < t.endpoints.size() && i < L7_MAX_ENDPOINTS; i++) {
        uint32_t k = gen * L7_MAX_ENDPOINTS + i;
        update_or_throw(maps_.endpoints, &k, &t.endpoints[i], "l7_endpoints");
    }

    // listeners are not per generation: a connection keeps the stable id it
    // got at connect time, and both generations name listeners by stable id
    std::vector<l7_listener_key> keep;
    for (size_t li = 0; li < t.listeners.size() && li < listener_ids.size(); li++) {
        l7_listener v = t.listeners[li].second;
        v.id = listener_ids[li];
        update_or_throw(maps_.listeners, &t.listeners[li].first, &v, "l7_listeners");
        keep.push_back(t.listeners[li].first);
    }
    for (const auto& stale : map_keys<l7_listener_key>(maps_.listeners)) {
        bool kept = false;
        for (const auto& k : keep)
            kept = kept || std::memcmp(&k, &stale, sizeof(k)) == 0;
        if (!kept)
            bpf_map_delete_elem(maps_.listeners, &stale);
    }
}

}  // namespace l7fast::dataplane
