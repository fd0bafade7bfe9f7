// The loaded data plane: the BPF object (libbpf skeleton), its attachments,
// its pinned maps, and typed access to the maps the daemon writes and reads.
// One instance per daemon; every kernel object is released by the destructor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/Fd.hpp"
#include "dataplane/Abi.hpp"

struct l7fast_bpf;  // libbpf skeleton (l7fast.skel.h)
struct ring_buffer;
struct bpf_link;

namespace l7fast::policy {
struct CompiledTables;
}

namespace l7fast::dataplane {

class DataplaneError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct DataplaneOptions {
    std::string cgroup;     // cgroup v2 directory for sockops
    std::string bpffs;      // pin directory, e.g. /sys/fs/bpf/l7fast
    uint32_t ingress_budget = 65536;
    bool trace = false;     // decision trace events (debugging)
    // Take over the maps and the sockops link a previous l7fastd pinned
    // (restart without dropping connections) when they are of this ABI
    // version; otherwise, or when false, start clean.
    bool adopt = false;
};

class Dataplane {
public:
    // Loads, attaches and pins. Throws DataplaneError with an explanation
    // (the verifier's last lines when a program is rejected).
    explicit Dataplane(const DataplaneOptions& opts);
    // Detaches and unpins everything, unless handed over (see handover()).
    ~Dataplane();
    // Whether the pinned state of a previous daemon was taken over.
    bool adopted() const { return adopted_; }
    // Leave the pinned maps, the sockops link and the programs attached to
    // the maps in place at destruction, for the next l7fastd to adopt.
    void handover() { handover_ = true; }
    Dataplane(const Dataplane&) = delete;
    Dataplane& operator=(const Dataplane&) = delete;

    // ---- policy tables ---------------------------------------------------
    // Writes `t` into the inactive generation (readers do not see it yet).
    // Listener ids in `t` (policy order) become the stable ids in
    // `listener_ids`. Returns the generation slot written (0/1).
    uint32_t stage(const policy::CompiledTables& t, std::span<const uint32_t> listener_ids);
    // Makes a staged generation the one every new request uses.
    void activate(uint32_t gen, uint64_t policy_generation);
    uint32_t active_gen() const { return active_gen_; }
    // Adds the counters of `gen` to `out` (by route index) and zeroes them.
    void drain_route_counters(uint32_t gen, uint32_t n_routes, std::vector<RouteCounters>& out);
    void set_enabled(bool on);
    void set_ingress_budget(uint32_t bytes);
    // daemon.access_log_sample: an L7_EV_ACCESS event for one kernel response
    // in n (per CPU); 0: none
    void set_access_log_sample(uint32_t n);

    // ---- verified-token cache (JWT, bpf/include/l7_jwtcache.h) -------------
    // Where the slow path stores a token of `provider` that it verified with
    // policy generation `policy_generation`: the active slot, its keyed hash
    // seed and the provider's token bound. nullopt unless that policy is the
    // active one and the kernel admits the provider's tokens in it. stage()
    // deletes a slot's entries before it writes the slot, so an entry never
    // outlives the policy that verified it.
    struct JwtCacheTarget {
        uint32_t gen = 0;
        uint64_t seed = 0;
        uint32_t max_token = 0;
    };
    std::optional<JwtCacheTarget> jwt_cache_target(uint64_t policy_generation, uint32_t provider) const;
    bool jwt_cache_put(const l7_jwt_key& k, const l7_jwt_entry& e);
    // Deletes every entry (the keys of a provider changed: a JWKS file).
    void jwt_cache_clear();
    size_t jwt_cache_entries() const;

    // ---- client connections ---------------------------------------------
    std::optional<l7_conn> conn(const l7_conn_key& k) const;
    // Registers a client the data plane has not seen (remote client, or a
    // local one outside the cgroup).
    bool conn_create(const l7_conn_key& k, uint32_t listener_id, uint8_t side);
    // The daemon's accepted socket of a remote client: its bytes go through
    // SK_SKB, and it is the redirect target for the client's responses.
    bool insert_remote_socket(const l7_conn_key& k, int fd);
    // l7_conn_user: what the slow path has answered and written (ABI header)
    void conn_publish(const l7_conn_key& k, const l7_conn_user& u);
    // Clears k_outstanding after the daemon finished a kernel exchange.
    void conn_clear_outstanding(const l7_conn_key& k);
    void conn_forget(const l7_conn_key& k);
    // l7_conn_user (zero when absent)
    l7_conn_user conn_user(const l7_conn_key& k) const;
    // every key of l7_conns (adoption: forget the ones without a session)
    std::vector<l7_conn_key> conn_keys() const;

    // ---- upstream pool -----------------------------------------------------
    l7_slot* slot(uint32_t id) const;
    bool slot_register_tuple(const l7_conn_key& k, uint32_t id);
    void slot_unregister_tuple(const l7_conn_key& k);
    std::optional<uint32_t> slot_by_tuple(const l7_conn_key& k) const;
    std::vector<std::pair<l7_conn_key, uint32_t>> slot_tuples() const;
    bool insert_upstream_socket(uint32_t id, int fd);
    void remove_slot_sockets(uint32_t id);

    // ---- events and telemetry ------------------------------------------------
    int events_fd() const;
    // Calls `fn` for each pending event; returns how many.
    int consume_events(const std::function<void(const l7_event&)>& fn);
    // Counters of route index `route` in generation `gen`.
    RouteCounters route_counters(uint32_t gen, uint32_t route) const;
    // l7_pool_stats of one upstream pool: `requests` are the exchanges the
    // kernel completed with it (no request bytes: the slot keeps none)
    RouteCounters pool_counters(uint32_t pool) const;
    void clear_pool_counters(uint32_t pool);
    std::vector<uint64_t> counters() const;  // enum l7_counter

    const std::string& pin_dir() const { return opts_.bpffs; }

private:
    static int on_event(void* self, void* data, size_t size);
    void release() noexcept;
    void attach();
    void pin();
    void unpin();
    void write_config();
    bool load(bool adopt);
    bool pins_adoptable(std::string* why) const;
    void recover_state();
    // deletes the verified-token cache's entries of one slot, or all
    void jwt_cache_delete_gen(std::optional<uint32_t> gen);

    DataplaneOptions opts_;
    struct ::l7fast_bpf* skel_ = nullptr;
    Fd cgroup_fd_;
    ::bpf_link* sockops_link_ = nullptr;
    std::vector<std::pair<int, int>> map_attachments_;  // (prog fd, attach type) per map fd
    std::vector<int> attached_map_fds_;
    ::ring_buffer* events_ = nullptr;
    const std::function<void(const l7_event&)>* consumer_ = nullptr;
    l7_slot* slots_ = nullptr;
    size_t slots_len_ = 0;
    size_t slot_stride_ = 0;
    uint32_t active_gen_ = 0;
    l7_config config_{};
    // match keys written per generation, so a later install can delete them
    std::vector<l7_match_key> strings_[L7_GENS];
    // JWT providers written per generation (max_token == 0: not in the kernel)
    std::vector<l7_jwt_provider> jwt_providers_[L7_GENS];
    int ncpus_ = 1;
    bool adopted_ = false;
    bool handover_ = false;
};

}  // namespace l7fast::dataplane
