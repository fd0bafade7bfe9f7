#include "support/BpfDecider.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "common/KernelHash.hpp"
#include "dataplane/MapIo.hpp"
#include "l7fast_abi.h"
// the skeleton is C; its .bss names struct dh_args, dh_out and l7_conn
#include "decide_harness.h"
#include "decide_harness.skel.h"

namespace l7fast::testing {

using dataplane::errstr;

static_assert(kPicks == DH_PICKS);

namespace {

// enum l7_decision_kind (bpf/lib/decide.h)
constexpr uint32_t kDecisionKernel = 0;
constexpr uint32_t kDecisionAnswer = 2;  // L7_D_ANSWER

}  // namespace

void BpfDecider::SkelDeleter::operator()(::decide_harness_bpf* s) const noexcept { decide_harness_bpf__destroy(s); }

BpfDecider::BpfDecider(const Options& options) : skel_(decide_harness_bpf__open())
{
    if (!skel_)
        throw std::runtime_error("opening the decision harness: " + errstr(errno));
    skel_->rodata->weak_hash = options.weak_hash ? 1 : 0;
    skel_->rodata->cfg_kfuncs = options.kfuncs ? 1 : 0;
    // the maps are the harness's own: none is pinned (l7_maps.h pins by
    // name, under the daemon's root; libbpf's default root is /sys/fs/bpf)
    bpf_map* map;
    bpf_object__for_each_map(map, skel_->obj) bpf_map__set_pin_path(map, nullptr);
    const int ncpus = libbpf_num_possible_cpus();
    if (ncpus <= 0)
        throw std::runtime_error("cannot count possible CPUs");
    // scratch entries per possible CPU, as the daemon sizes them
    bpf_map__set_max_entries(skel_->maps.l7_scratch, static_cast<uint32_t>(ncpus) * L7_SCRATCH_SLOTS);
    if (const int err = decide_harness_bpf__load(skel_.get()); err != 0)
        throw std::runtime_error(std::string("loading the decision harness (root and BPF needed") +
                                 (options.kfuncs ? ", and l7fast.ko's kfuncs" : "") + "): " + errstr(err));
    prog_fd_ = bpf_program__fd(skel_->progs.decide);
    tables_ = dataplane::TableWriter(dataplane::TableMaps::of(skel_->obj));
}

BpfDecider::~BpfDecider() = default;

uint64_t BpfDecider::weak_string_hash(uint64_t, std::string_view s, bool)
{
    uint64_t h = s.size() % 3;
    for (char c : s)
        h += static_cast<uint8_t>(c) & 1;  // lower-casing keeps a letter's parity
    return h;
}

bool BpfDecider::unique_string_keys(const policy::CompiledTables& t)
{
    std::map<std::tuple<uint64_t, uint16_t, uint16_t, uint16_t>, int> seen;
    for (const auto& [k, v] : t.strings)
        if (k.gen != 0 || k.space > 1 || !seen.emplace(std::tuple{k.hash, k.kind, k.aux, k.space}, 0).second)
            return false;
    return true;
}

void BpfDecider::install(const policy::CompiledTables& t)
{
    const uint32_t gen = active_gen_ ^ 1;
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < t.listeners.size(); i++)
        ids.push_back(i);
    tables_.write(t, ids, gen);

    change_config([&](l7_config& cfg) {
        cfg.meta[gen] = t.meta;
        cfg.active_gen = gen;
        cfg.cache_tag++;
        cfg.flags |= L7_CF_ENABLED;
        cfg.ingress_budget = 65536;  // DataplaneOptions' default
        cfg.abi_version = L7_ABI_VERSION;
    });
    active_gen_ = gen;
    n_clusters_ = static_cast<uint32_t>(t.clusters.size());
    seed_ = t.meta.seed;
}

void BpfDecider::change_config(const std::function<void(l7_config&)>& change)
{
    const int cfd = bpf_map__fd(skel_->maps.l7_config);
    uint32_t zero = 0;
    l7_config cfg{};
    if (bpf_map_lookup_elem(cfd, &zero, &cfg) != 0)
        throw std::runtime_error("reading l7_config: " + errstr(errno));
    change(cfg);
    dataplane::update_or_throw(cfd, &zero, &cfg, "l7_config");
}

void BpfDecider::set_key_epoch(uint32_t epoch)
{
    change_config([epoch](l7_config& cfg) {
        if (cfg.key_epoch != epoch)
            cfg.cache_tag++;
        cfg.key_epoch = epoch;
    });
}

void BpfDecider::renew_cache_tag()
{
    change_config([](l7_config& cfg) { cfg.cache_tag++; });
}

std::optional<l7_jwt_entry> BpfDecider::cached(std::string_view token, uint32_t provider) const
{
    l7_jwt_key k{};
    k.hash = policy::kernel::match_hash(seed_, token, false);
    k.gen = static_cast<__u16>(active_gen_);
    k.provider = static_cast<__u16>(provider);
    k.len = static_cast<__u32>(token.size());
    l7_jwt_entry e{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_jwt_cache), &k, &e) != 0)
        return std::nullopt;
    return e;
}

size_t BpfDecider::set_jwt_headers(uint32_t epoch, const std::vector<dataplane::JwtHeaderEntry>& headers)
{
    return tables_.write_jwt_headers(active_gen_, seed_, epoch, headers);
}

size_t BpfDecider::set_jwt_kids(uint32_t epoch, const std::vector<dataplane::JwtKidEntry>& kids)
{
    return tables_.write_jwt_kids(active_gen_, epoch, kids);
}

std::pair<uint64_t, uint64_t> BpfDecider::run_stats() const
{
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd_, &info, &len) != 0)
        throw std::runtime_error("reading the decision program's info: " + errstr(errno));
    return {info.run_cnt, info.run_time_ns};
}

Decision BpfDecider::decide(std::string_view request, uint32_t listener, const std::array<Pick, kPicks>& picks)
{
    auto* bss = skel_->bss;
    const size_t len = std::min(request.size(), sizeof(bss->input));
    std::memcpy(bss->input, request.data(), len);
    bss->args = {};
    bss->args.len = static_cast<__u32>(len);
    bss->args.listener = listener;
    bss->args.n_clusters = n_clusters_;
    bss->args.now_ns = now_ns_;
    bss->args.family = client_family_;
    std::memcpy(bss->args.client_ip, client_ip_.data(), sizeof(bss->args.client_ip));
    for (int i = 0; i < kPicks; i++) {
        bss->args.rr[i] = picks[i].rr;
        bss->args.random[2 * i] = picks[i].random[0];
        bss->args.random[2 * i + 1] = picks[i].random[1];
    }
    LIBBPF_OPTS(bpf_test_run_opts, run);
    if (bpf_prog_test_run_opts(prog_fd_, &run) != 0)
        throw std::runtime_error("running the decision harness: " + errstr(errno));
    const dh_out& o = bss->out;
    if (o.status != 0)
        throw std::runtime_error("the decision harness could not run (status " + std::to_string(o.status) + ")");

    Decision d;
    d.reason = o.reason;
    for (int i = 0; i < kPicks; i++)
        d.pools[i] = o.pool[i];
    if (o.route_flags & L7_RF_VALID)
        d.route = static_cast<int>(o.route_key % L7_MAX_ROUTES);
    if (o.kind == kDecisionKernel || (o.reason == L7_R_POOL_MISS && o.pool[0] != kNoPool))
        d.verdict = Verdict::Kernel;  // routed and picked: the harness's pools have no connection to claim
    else if (o.kind == kDecisionAnswer && (o.answer == L7_ANS_NO_TOKEN || o.answer == L7_ANS_BAD_TOKEN)) {
        d.verdict = Verdict::Unauthorized;
        d.token_presented = o.answer == L7_ANS_BAD_TOKEN;
        d.response = o.resp % L7_MAX_RESPONSES;
        d.detail = o.detail;
    } else if ((o.kind == kDecisionAnswer && o.answer == L7_ANS_LIMITED) || o.reason == L7_R_RATE_LIMITED) {
        d.verdict = Verdict::RateLimited;
        d.answered = o.kind == kDecisionAnswer;
        d.response = o.resp % L7_MAX_RESPONSES;
    } else if (o.reason == L7_R_RBAC_DENY) {
        d.verdict = Verdict::RbacDeny;
        d.answered = o.kind == kDecisionAnswer;
        d.rbac_rule = o.rbac_rule == L7_NO_RULE ? -1 : static_cast<int>(o.rbac_rule);
    }
    else if (o.reason == L7_R_NO_ROUTE)
        d.verdict = Verdict::NoRoute;
    else
        d.verdict = Verdict::SlowPath;
    return d;
}

uint64_t BpfDecider::bucket(uint32_t id) const
{
    uint64_t v = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_buckets), &id, &v) != 0)
        throw std::runtime_error("reading l7_buckets: " + errstr(errno));
    return v;
}

int BpfDecider::buckets_fd() const
{
    return bpf_map__fd(skel_->maps.l7_buckets);
}

int BpfDecider::rate_keys_fd() const
{
    return bpf_map__fd(skel_->maps.l7_rate_keys);
}

int BpfDecider::rate_take_fd() const
{
    return bpf_program__fd(skel_->progs.l7_rate_take_user);
}

// The keyed table at l7_rate_keys[id] (a map-in-map lookup gives its id).
Fd BpfDecider::key_table(uint32_t id) const
{
    uint32_t map_id = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_rate_keys), &id, &map_id) != 0)
        throw std::runtime_error("no keyed table at l7_rate_keys[" + std::to_string(id) + "]: " + errstr(errno));
    Fd fd(bpf_map_get_fd_by_id(map_id));
    if (!fd.valid())
        throw std::runtime_error("opening the keyed table: " + errstr(errno));
    return fd;
}

std::optional<uint64_t> BpfDecider::key_bucket(uint32_t id, const l7_rate_key& key) const
{
    uint64_t v = 0;
    if (bpf_map_lookup_elem(key_table(id).get(), &key, &v) != 0)
        return std::nullopt;
    return v;
}

void BpfDecider::set_key_bucket(uint32_t id, const l7_rate_key& key, uint64_t mark)
{
    if (bpf_map_update_elem(key_table(id).get(), &key, &mark, 0) != 0)
        throw std::runtime_error("writing a key's bucket: " + errstr(errno));
}

void BpfDecider::set_bucket(uint32_t id, uint64_t mark)
{
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_buckets), &id, &mark, 0) != 0)
        throw std::runtime_error("writing l7_buckets: " + errstr(errno));
}

}  // namespace l7fast::testing
