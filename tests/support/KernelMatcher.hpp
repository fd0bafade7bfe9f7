// The kernel's matcher, emulated over CompiledTables exactly as
// bpf/lib/match.h, bpf/lib/rbac.h and l7_g_decide/l7_pick_pool
// (bpf/l7fast.bpf.c, bpf/lib/select.h) use them. Shared by the differential
// unit test (tests/unit/compiler_differential_test.cpp) and the differential
// fuzz target (tests/fuzz/fuzz_match_diff.cpp); keep it in step with the BPF.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "policy/KernelHash.hpp"
#include "policy/PolicyCompiler.hpp"

namespace l7fast::testing {

using namespace l7fast::policy;

inline constexpr uint16_t kNone = 0xffff;

// ---- what the kernel parser leaves for the matcher (struct l7_msg) --------------

struct ParsedHeader {
    uint32_t name_off, name_len, val_off, val_len, name_hash;
};

struct ParsedRequest {
    std::string window;  // the request head as received
    uint16_t method = L7_M_OTHER;
    uint32_t path_off = 0, path_len = 0;
    uint16_t host_idx = kNone;
    uint32_t host_len = 0;
    bool path_not_normal = false;  // L7_MF_PATH_NOT_NORMAL
    std::vector<ParsedHeader> hdrs;
};

// ---- the kernel matcher over CompiledTables -----------------------------------------

using WindowHashFn = std::function<uint64_t(const std::string& window, uint32_t off, uint32_t len, uint64_t seed, bool lower)>;

inline uint64_t kernel_window_hash(const std::string& w, uint32_t off, uint32_t len, uint64_t seed, bool lower)
{
    return kernel::window_hash(w, off, len, seed, lower);
}

enum class Verdict {
    Kernel,    // forwarded by the kernel (RBAC, if any, allowed it)
    NoRoute,
    SlowPath,
    RbacDeny,  // the kernel's rules pass denied: the slow path answers
};

struct Decision {
    Verdict verdict;
    int route = -1;
    std::string why;
};

class KernelEmulator {
public:
    KernelEmulator(const CompiledTables& t, WindowHashFn hash) : t_(t), hash_(std::move(hash))
    {
        for (const auto& [k, v] : t.strings) {
            unique_keys_ &= k.gen == 0 && k.space <= 1;
            unique_keys_ &= strings_.emplace(std::tuple{k.hash, k.kind, k.aux, k.space}, &v).second;
        }
    }

    // False when two l7_match entries have one key (one would overwrite the
    // other in the map), or an entry names a generation (the installer's job)
    // or a space that does not exist.
    bool unique_keys() const { return unique_keys_; }

    // l7_g_decide up to the pool claim
    Decision decide(const ParsedRequest& rq, uint32_t listener_id) const
    {
        if (rq.method == L7_M_CONNECT)
            return {Verdict::SlowPath, -1, "CONNECT"};
        if (rq.path_not_normal)
            return {Verdict::SlowPath, -1, "path not in normal form"};
        HdrVal hdr_val;
        const int r = match(rq, listener_id, hdr_val);
        if (r == -2)
            return {Verdict::SlowPath, -1, "a match header appears twice"};
        if (r < 0 || r >= static_cast<int>(t_.routes.size()) || !(t_.routes[r].flags & L7_RF_VALID))
            return {Verdict::NoRoute, r, ""};
        const l7_route& route = t_.routes[r];
        if (!(route.flags & L7_RF_KERNEL))
            return {Verdict::SlowPath, r, "route placed in user space"};
        if ((route.flags & L7_RF_RBAC) &&
            rbac(rq, hdr_val, route.flags, route.rule_first | (uint32_t{route.rule_count} << 16)) != 1)
            return {Verdict::RbacDeny, r, "RBAC denied"};
        return {Verdict::Kernel, r, ""};
    }

    // l7_pick_pool with the two random draws and the round-robin counter
    long pick_pool(int r, uint32_t random1, uint32_t random2, uint64_t rr, uint32_t* cluster_out) const
    {
        const l7_route& route = t_.routes[r];
        uint32_t ci = route.cluster[0];
        if (route.n_targets > 1 && route.total_weight) {
            const uint32_t x = random1 % route.total_weight;
            for (uint32_t i = 0; i < L7_MAX_TARGETS && i < route.n_targets; i++) {
                if (x < route.cum_weight[i]) {
                    ci = route.cluster[i];
                    break;
                }
            }
        }
        *cluster_out = ci;
        if (ci >= t_.clusters.size())
            return -1;
        const l7_cluster& c = t_.clusters[ci];
        if (!c.n_endpoints)
            return -1;
        uint32_t e = 0;
        if (c.lb == L7_LB_WEIGHTED && c.total_weight) {
            const uint32_t x = random2 % c.total_weight;
            uint32_t lo = 0, hi = c.n_endpoints - 1u;
            for (int i = 0; i < 11 && lo < hi; i++) {
                const uint32_t mid = (lo + hi) / 2;
                if (x < t_.endpoints.at(c.first_endpoint + mid).cum_weight)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            e = lo;
        } else {
            e = static_cast<uint32_t>(rr % c.n_endpoints);
        }
        return t_.endpoints.at(c.first_endpoint + e).pool_id;
    }

private:
    using Bitmap = l7_bitmap;
    using HdrVal = std::array<uint16_t, L7_MAX_MATCH_HDRS>;

    const Bitmap& bm(uint32_t idx) const { return t_.bitmaps.at(idx); }
    const Bitmap& bm_in(uint32_t space, uint32_t idx) const
    {
        return space == L7_SPACE_RULES ? t_.rule_bitmaps.at(idx) : t_.bitmaps.at(idx);
    }
    static void bm_and(Bitmap& d, const Bitmap& s)
    {
        for (int i = 0; i < L7_BM_WORDS; i++)
            d.w[i] &= s.w[i];
    }
    static void bm_or(Bitmap& d, const Bitmap& s)
    {
        for (int i = 0; i < L7_BM_WORDS; i++)
            d.w[i] |= s.w[i];
    }
    static int bm_first(const Bitmap& b)
    {
        for (int i = 0; i < L7_BM_WORDS; i++)
            if (b.w[i])
                return i * 64 + __builtin_ctzll(b.w[i]);
        return -1;
    }

    // l7_g_or_str
    void or_str(Bitmap& tmp, const ParsedRequest& rq, l7_match_kind kind, bool lower, uint16_t aux, uint32_t off,
                uint32_t len, uint16_t space = L7_SPACE_ROUTES) const
    {
        if (len > L7_MAX_MATCH_STR)
            return;
        const uint64_t h = hash_(rq.window, off, len, t_.meta.seed, lower);
        auto it = strings_.find({h, static_cast<uint16_t>(kind), aux, space});
        if (it == strings_.end())
            return;
        const l7_match_val& v = *it->second;
        if (v.len != len || !kernel::window_eq(rq.window, off, len, v.str, lower))
            return;
        bm_or(tmp, v.routes);
    }

    // l7_hdr_name_eq: request name lower-cased, meta name as stored
    static bool name_eq(const ParsedRequest& rq, const ParsedHeader& h, const uint8_t* name)
    {
        for (uint32_t i = 0; i < h.name_len; i++) {
            char c = rq.window[h.name_off + i];
            c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
            if (static_cast<uint8_t>(c) != name[i])
                return false;
        }
        return true;
    }

    // l7_match_route
    int match(const ParsedRequest& rq, uint32_t listener_id, HdrVal& hdr_val) const
    {
        const l7_gen_meta& meta = t_.meta;
        Bitmap acc = bm(L7_BMI_LISTENER(listener_id & (L7_MAX_LISTENERS - 1)));
        bm_and(acc, bm(L7_BMI_METHOD(rq.method < L7_M_COUNT ? rq.method : uint16_t{L7_M_OTHER})));

        if (meta.flags & L7_GMF_HOST) {
            Bitmap tmp = bm(L7_BMI_HOST_ANY);
            if (rq.host_idx != kNone)
                or_str(tmp, rq, L7_MK_HOST_EXACT, true, 0, rq.hdrs[rq.host_idx].val_off, rq.host_len);
            bm_and(acc, tmp);
        }
        if (meta.flags & L7_GMF_PATH) {
            Bitmap tmp = bm(L7_BMI_PATH_ANY);
            or_str(tmp, rq, L7_MK_PATH_EXACT, false, 0, rq.path_off, rq.path_len);
            for (uint32_t i = 0; i < L7_MAX_PREFIX_LENS && i < meta.n_prefix_lens; i++) {
                const uint32_t len = meta.prefix_lens[i];
                if (len > rq.path_len)
                    break;
                or_str(tmp, rq, L7_MK_PATH_PREFIX, false, static_cast<uint16_t>(len), rq.path_off, len);
            }
            bm_and(acc, tmp);
        }
        std::fill(std::begin(hdr_val), std::end(hdr_val), kNone);
        if (meta.n_match_hdrs) {
            bool dup = false;
            for (uint32_t i = 0; i < rq.hdrs.size() && i < L7_MAX_HEADERS; i++) {
                const ParsedHeader& h = rq.hdrs[i];
                for (uint32_t j = 0; j < L7_MAX_MATCH_HDRS && j < meta.n_match_hdrs; j++) {
                    if (static_cast<uint32_t>(meta.hdr_name_hash[j]) != h.name_hash ||
                        meta.hdr_name_len[j] != h.name_len || !name_eq(rq, h, meta.hdr_name[j]))
                        continue;
                    if (hdr_val[j] != kNone)
                        dup = true;
                    hdr_val[j] = static_cast<uint16_t>(i);
                }
            }
            if (dup)
                return -2;
            for (uint32_t j = 0; j < L7_MAX_MATCH_HDRS && j < meta.n_match_hdrs; j++) {
                Bitmap tmp = bm(L7_BMI_HDR_ANY(j));
                if (hdr_val[j] != kNone) {
                    const ParsedHeader& h = rq.hdrs[hdr_val[j]];
                    bm_or(tmp, bm(L7_BMI_HDR_PRESENT(j)));
                    or_str(tmp, rq, L7_MK_HDR_EXACT, false, static_cast<uint16_t>(j), h.val_off, h.val_len);
                }
                bm_and(acc, tmp);
            }
        }
        return bm_first(acc);
    }

    // l7_range_mask (bpf/lib/rbac.h)
    static uint64_t range_mask(uint32_t i, uint32_t lo, uint32_t hi)
    {
        const uint32_t wlo = i * 64, whi = wlo + 64;
        uint64_t m = ~0ULL;
        if (hi <= wlo || lo >= whi)
            return 0;
        if (lo > wlo)
            m &= ~0ULL << (lo - wlo);
        if (hi < whi)
            m &= ~0ULL >> (whi - hi);
        return m;
    }

    // l7_g_rbac: 1 allowed, 0 denied, -1 tables unusable
    int rbac(const ParsedRequest& rq, const HdrVal& hdr_val, uint32_t flags, uint32_t rules) const
    {
        const l7_gen_meta& meta = t_.meta;
        const uint32_t lo = rules & 0xffff, hi = lo + (rules >> 16);
        if (hi > L7_MAX_RULES)
            return -1;
        Bitmap acc = bm_in(L7_SPACE_RULES, L7_BMI_METHOD(rq.method < L7_M_COUNT ? rq.method : uint16_t{L7_M_OTHER}));
        if (meta.flags & L7_GMF_RULE_PATH) {
            Bitmap tmp = bm_in(L7_SPACE_RULES, L7_BMI_PATH_ANY);
            or_str(tmp, rq, L7_MK_PATH_EXACT, false, 0, rq.path_off, rq.path_len, L7_SPACE_RULES);
            for (uint32_t i = 0; i < L7_MAX_PREFIX_LENS && i < meta.n_prefix_lens; i++) {
                const uint32_t len = meta.prefix_lens[i];
                if (len > rq.path_len)
                    break;
                or_str(tmp, rq, L7_MK_PATH_PREFIX, false, static_cast<uint16_t>(len), rq.path_off, len,
                       L7_SPACE_RULES);
            }
            bm_and(acc, tmp);
        }
        for (uint32_t j = 0; j < L7_MAX_MATCH_HDRS && j < meta.n_match_hdrs; j++) {
            Bitmap tmp = bm_in(L7_SPACE_RULES, L7_BMI_HDR_ANY(j));
            if (hdr_val[j] != kNone) {
                const ParsedHeader& h = rq.hdrs[hdr_val[j]];
                bm_or(tmp, bm_in(L7_SPACE_RULES, L7_BMI_HDR_PRESENT(j)));
                or_str(tmp, rq, L7_MK_HDR_EXACT, false, static_cast<uint16_t>(j), h.val_off, h.val_len,
                       L7_SPACE_RULES);
            }
            bm_and(acc, tmp);
        }
        const Bitmap& deny = bm_in(L7_SPACE_RULES, L7_BMI_DENY);
        bool found = false, first_deny = false, any_deny = false;
        for (uint32_t i = 0; i < L7_BM_WORDS; i++) {
            const uint64_t hit = acc.w[i] & range_mask(i, lo, hi);
            if (!hit)
                continue;
            if (hit & deny.w[i])
                any_deny = true;
            if (!found) {
                found = true;
                first_deny = (hit & (~hit + 1) & deny.w[i]) != 0;
            }
        }
        if (!found)
            return !(flags & L7_RF_RBAC_DEFAULT_DENY);
        if (flags & L7_RF_RBAC_DENY_OVERRIDES)
            return !any_deny;
        return !first_deny;
    }

    const CompiledTables& t_;
    WindowHashFn hash_;
    std::map<std::tuple<uint64_t, uint16_t, uint16_t, uint16_t>, const l7_match_val*> strings_;
    bool unique_keys_ = true;
};

}  // namespace l7fast::testing
