// The loaded data plane: the BPF object (libbpf skeleton), its attachments,
// its pinned maps, and typed access to the maps the daemon writes and reads.
// One instance per daemon; every kernel object is released by the destructor.
#pragma once

#include <array>
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
#include "dataplane/MapIo.hpp"
#include "dataplane/Tables.hpp"

struct l7fast_bpf;  // libbpf skeleton (l7fast.skel.h)
struct ring_buffer;
struct bpf_link;

namespace l7fast::policy {
struct CompiledTables;
}

namespace l7fast::dataplane {

// A client connection's entry in l7_conns: its index and allocation count.
struct ConnRef {
    uint32_t idx = L7_NO_CONN;
    uint32_t gen = 0;
    bool valid() const { return idx < L7_MAX_CONNS; }
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
    // Socket programs may call l7fast.ko's kfuncs (ModuleInfo::socket_kfuncs):
    // the HS verifier is loaded (cfg_kfuncs). If the object does not load so,
    // it is loaded without them (kfuncs() says which).
    bool kfuncs = false;
};

// A BPF_F_MMAPABLE array map (l7_slot_state 256 KiB, l7_pools 46 KiB,
// l7_conn_sync 2 MiB), shared with the kernel for the daemon's life. The
// kernel maps every page of a BPF mmap at once (remap_vmalloc_range), so a
// single mapping would put all of it in the daemon's RSS from the start:
// the range is reserved without access and mapped in windows of
// kWindowBytes as entries in them are first used. A pointer at() returned
// stays valid until the array is destroyed. Single-threaded, like the
// daemon's event loop.
template <class T>
class MappedArray {
public:
    static constexpr size_t kWindowBytes = 16384;

    MappedArray() = default;
    MappedArray(int map_fd, uint32_t entries, const char* what);
    ~MappedArray();
    MappedArray(MappedArray&& o) noexcept { *this = std::move(o); }
    MappedArray& operator=(MappedArray&& o) noexcept;
    MappedArray(const MappedArray&) = delete;
    MappedArray& operator=(const MappedArray&) = delete;
    // Entry i, its window mapped if it was not; null when i is out of
    // range or the window cannot be mapped (logged once per window).
    T* at(uint32_t i) const;
    uint32_t size() const { return entries_; }
    // Windows mapped now (tests)
    size_t windows_mapped() const;

private:
    int map_window(size_t w) const;  // 0 or errno
    void reset() noexcept;

    T* base_ = nullptr;
    uint32_t entries_ = 0;
    size_t len_ = 0;
    int fd_ = -1;  // a duplicate of the map's fd: windows are mapped from it
    const char* what_ = "";
    mutable std::vector<uint8_t> window_;  // per window: 0 unmapped, 1 mapped, 2 failed
};

// The rate-limit buckets the kernel shares with the slow path (l7_buckets,
// mmapped; bpf/include/l7_bucket.h): ids leased to the daemon's limiters of
// kernel routes. A lease keeps the table (and its mapping) alive and frees
// its id when the last holder lets go, so limiters may outlive the
// Dataplane. Single-threaded, like the daemon's event loop.
//
// A keyed limit's lease (`max_keys`) also gets a table of its keys' buckets
// in l7_rate_keys (`keys_fd`, an array of maps) at its id: an LRU hash of
// max_keys + kLruSlack * CPUs entries (the kernel's LRU frees entries in
// batches of up to 128 per CPU, so that many more keep max_keys of them),
// taken from by l7_rate_take_user (`take_fd`) for the slow path. The tables'
// entries together are at most kMaxKernelKeys (their memory is the kernel's,
// preallocated); a lease beyond that, or whose table cannot be made, is
// nullopt and the limit runs in user space.
class BucketTable : public std::enable_shared_from_this<BucketTable> {
public:
    static constexpr uint64_t kMaxKernelKeys = 1u << 20;
    static constexpr uint32_t kLruSlack = 128;

    BucketTable(int map_fd, uint32_t entries, int keys_fd = -1, int take_fd = -1);
    // An entry reset to 0 (a fresh, full bucket); nullopt when every id is
    // leased (or its page cannot be mapped), or, keyed, see above.
    std::optional<SharedBucket> lease(std::optional<uint32_t> max_keys = std::nullopt);
    size_t leased() const { return leased_; }
    // entries of the keyed tables leased now
    uint64_t kernel_keys() const { return kernel_keys_; }

private:
    bool make_keys_table(uint32_t id, uint64_t entries);

    MappedArray<uint64_t> entries_;
    std::vector<bool> used_;
    size_t leased_ = 0;
    uint32_t cursor_ = 0;
    Fd keys_fd_;  // duplicates: a lease may outlive the Dataplane
    Fd take_fd_;
    uint64_t kernel_keys_ = 0;
};

class Dataplane {
public:
    // Loads, attaches and pins. Throws DataplaneError with an explanation
    // (the verifier's last lines when a program is rejected).
    explicit Dataplane(const DataplaneOptions& opts);
    // Detaches and unpins everything (its members do, in order), unless
    // handed over (see handover()).
    ~Dataplane();
    // Whether the pinned state of a previous daemon was taken over.
    bool adopted() const { return adopted_; }
    // Leave the pinned maps, the sockops link and the programs attached to
    // the maps in place at destruction, for the next l7fastd to adopt.
    void handover();
    Dataplane(const Dataplane&) = delete;
    Dataplane& operator=(const Dataplane&) = delete;

    // ---- policy tables ---------------------------------------------------
    // Writes `t` into the inactive generation (readers do not see it yet).
    // Listener ids in `t` (policy order) become the stable ids in
    // `listener_ids`. Returns the generation slot written (0/1).
    uint32_t stage(const policy::CompiledTables& t, std::span<const uint32_t> listener_ids,
                   uint64_t policy_generation);
    // Makes a staged generation the one every new request uses.
    void activate(uint32_t gen, uint64_t policy_generation);
    uint32_t active_gen() const { return active_gen_; }
    // Adds the counters of `gen` to `out` (by route index) and zeroes them.
    void drain_route_counters(uint32_t gen, uint32_t n_routes, std::vector<RouteCounters>& out);
    // The kernel's RBAC denials of generation `gen` by deciding rule (rule
    // bits 0..n_rules-1, l7_rule_denied); `drain` zeroes what it read.
    std::vector<uint64_t> rule_denials(uint32_t gen, uint32_t n_rules, bool drain);
    void set_enabled(bool on);
    void set_ingress_budget(uint32_t bytes);
    // daemon.access_log_sample: an L7_EV_ACCESS event for one kernel response
    // in n (per CPU); 0: none
    void set_access_log_sample(uint32_t n);
    // L7FAST_TEST_FAULT=bench-raw: the pool every request goes to.
    void set_raw_pool(uint32_t pool);
    // The buckets of kernel rate limits (l7_route.bucket).
    const std::shared_ptr<BucketTable>& buckets() const { return buckets_; }

    // ---- verified-token cache (JWT, bpf/include/l7_jwtcache.h) -------------
    // Where the slow path stores a token of `provider` that it verified with
    // policy generation `policy_generation`: the active slot, its keyed hash
    // seed, the provider's token bound and the cache tag entries carry
    // (l7_jwt_entry.tag). nullopt unless that policy is the active one and
    // the kernel admits the provider's tokens in it. stage() deletes a
    // slot's entries before it writes the slot, and the tag changes with
    // every activation and key epoch, so an entry never outlives the policy
    // and keys that verified it.
    struct JwtCacheTarget {
        uint32_t gen = 0;
        uint64_t seed = 0;
        uint32_t max_token = 0;
        uint64_t tag = 0;
    };
    std::optional<JwtCacheTarget> jwt_cache_target(uint64_t policy_generation, uint32_t provider) const;
    bool jwt_cache_put(const l7_jwt_key& k, const l7_jwt_entry& e);
    // Deletes every entry (the keys of a provider changed: a JWKS file).
    void jwt_cache_clear();
    size_t jwt_cache_entries() const;

    // ---- the kernel's HS verifier (bpf/include/l7_jwtverify.h) -------------
    // Whether the programs were loaded with it (DataplaneOptions::kfuncs).
    bool kfuncs() const { return kfuncs_; }
    // l7_config.key_epoch: header entries of another epoch verify nothing.
    void set_key_epoch(uint32_t epoch);
    // Replaces the header entries of the slot holding `policy_generation`
    // (staged or active) with `headers`, of key epoch `epoch`. Returns the
    // number written (the rest did not fit or were malformed); nothing when
    // no slot holds that policy.
    size_t set_jwt_headers(uint64_t policy_generation, uint32_t epoch, const std::vector<JwtHeaderEntry>& headers);
    // those of the active slot (the other holds the previous policy's until restaged)
    size_t jwt_header_entries() const;
    // Likewise the kids of its providers' keys, for headers the kernel scans
    // (l7_jwt_kids; TableWriter::write_jwt_kids).
    size_t set_jwt_kids(uint64_t policy_generation, uint32_t epoch, const std::vector<JwtKidEntry>& kids);
    // the kids of the active slot (not counting the provider-wide entries)
    size_t jwt_kid_entries() const;
    // l7_config.wall_off_ns: CLOCK_REALTIME - CLOCK_BOOTTIME, written when
    // it moved by a millisecond or more (a clock step, NTP slewing).
    void refresh_wall_clock();

    // ---- client connections ---------------------------------------------
    // The l7_conns entry of a client connection, by its 4-tuple: local
    // clients get theirs from sockops, remote ones from conn_create_remote.
    std::optional<ConnRef> conn_of(const l7_conn_key& k) const;
    // Its kernel state (a system call; nullopt once freed or reused).
    std::optional<l7_conn> conn(ConnRef r) const;
    // A client the data plane has not seen (remote, or a local one outside
    // the cgroup or beyond sockops' table): an entry of the daemon's half,
    // with the daemon's accepted socket `fd` in l7_sk_remote (its bytes go
    // through SK_SKB, and it is the redirect target for the client's
    // responses). An invalid ref when the table is full.
    ConnRef conn_create_remote(const l7_conn_key& k, uint32_t listener_id, int fd);
    // Ends the data plane's part of a connection: its socket leaves the
    // socket map, then the entry is freed (gen keeps the old references
    // from matching a reused entry). `remote_fd`: the daemon's socket of a
    // remote client, -1 for a local one.
    void conn_free(ConnRef r, const l7_conn_key& k, int remote_fd);
    // The connection's hand-back counts, shared with the kernel (mmapped).
    l7_conn_sync* conn_sync(ConnRef r) const;
    // every entry of l7_conn_by_tuple (adoption: free the ones without a session)
    std::vector<std::pair<l7_conn_key, ConnRef>> conn_refs() const;
    // Whether an entry's socket is still in its socket map (a closed socket
    // leaves it by itself): a client waiting in a listener's backlog has
    // one, a connection that died without the daemon has none.
    bool conn_socket_present(ConnRef r, bool remote) const;
    // Deletes socket-cookie references whose connection entry is free or
    // reused, or whose slot is empty (their sockets are gone); returns how
    // many.
    size_t forget_stale_cookies();

    // ---- upstream pool -----------------------------------------------------
    // The shared state word of a slot and a pool (mmapped).
    uint64_t* slot_state(uint32_t id) const;
    l7_pool* pool(uint32_t pool_id) const;
    // The exchange on a slot (a system call) and its first write, before the
    // connection exists.
    std::optional<l7_slot> slot(uint32_t id) const;
    bool slot_write(uint32_t id, const l7_slot& s);
    bool slot_register_tuple(const l7_conn_key& k, uint32_t id);
    void slot_unregister_tuple(const l7_conn_key& k);
    std::optional<uint32_t> slot_by_tuple(const l7_conn_key& k) const;
    std::vector<std::pair<l7_conn_key, uint32_t>> slot_tuples() const;
    // The daemon's end of pooled connection `id` (SK_SKB for responses
    // from the network).
    bool insert_upstream_socket(uint32_t id, int fd);
    void remove_slot_sockets(uint32_t id, int fd);

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
    uint64_t counter(uint32_t which) const;  // one of them (0 if unreadable)
    // Client connections the data plane knows (l7_conns entries in use), by
    // mode (kernel, or handed to the slow path) and side (local, remote):
    // [mode][side]. One batched read of the table.
    std::array<std::array<uint64_t, 2>, 2> connection_modes() const;

    const std::string& pin_dir() const { return opts_.bpffs; }

private:
    static int on_event(void* self, void* data, size_t size);
    void attach();
    void pin();
    void write_config();
    // l7_config.cache_tag: a value no entry of the verified-token cache
    // carries (the first one random: not one of an earlier instance's)
    void renew_cache_tag();
    bool load(bool adopt);
    bool pins_adoptable(std::string* why) const;
    void recover_state();
    // deletes the entries of one slot, or all, from a map keyed by
    // l7_jwt_key (the verified-token cache, the HS verifier's headers)
    void jwt_delete_gen(const ::bpf_map* map, std::optional<uint32_t> gen);
    // The sum over CPUs of entry `key` of a per-CPU __u64 array (`per`:
    // ncpus_ values of scratch); nullopt when it cannot be read.
    std::optional<uint64_t> percpu_sum(int fd, uint32_t key, std::vector<uint64_t>& per) const;

    // The loaded object's resources, each released by its own destructor,
    // in the reverse of their order here: the event ring and the mapped
    // arrays, the programs' sockmap attachments, the pins, the sockops
    // link, the object. handover() keeps the attachments and the pins.
    struct SkelDeleter {
        void operator()(::l7fast_bpf* s) const noexcept;
    };
    struct LinkDeleter {
        void operator()(::bpf_link* l) const noexcept;
    };
    struct RingDeleter {
        void operator()(::ring_buffer* r) const noexcept;
    };
    // A program attached to a sockmap, detached at destruction unless kept.
    class MapAttachment {
    public:
        MapAttachment(int prog_fd, int map_fd, int type) : prog_fd_(prog_fd), map_fd_(map_fd), type_(type) {}
        MapAttachment(MapAttachment&& o) noexcept : prog_fd_(o.prog_fd_), map_fd_(o.map_fd_), type_(o.type_)
        {
            o.prog_fd_ = -1;
        }
        MapAttachment& operator=(MapAttachment&&) = delete;
        ~MapAttachment();
        void keep() { prog_fd_ = -1; }

    private:
        int prog_fd_, map_fd_, type_;
    };
    // The pins under <bpffs> (and the directory), removed at destruction
    // unless kept: from the moment the object is loaded they are this
    // instance's (its own, or the previous daemon's it adopted).
    class Pins {
    public:
        Pins() = default;
        explicit Pins(std::string dir) : dir_(std::move(dir)) {}
        Pins(Pins&& o) noexcept : dir_(std::move(o.dir_)) { o.dir_.clear(); }
        Pins& operator=(Pins&& o) noexcept;
        ~Pins();
        void keep() { dir_.clear(); }

    private:
        void remove() noexcept;
        std::string dir_;  // empty: nothing to remove
    };

    DataplaneOptions opts_;
    std::unique_ptr<::l7fast_bpf, SkelDeleter> skel_;
    Fd cgroup_fd_;
    std::unique_ptr<::bpf_link, LinkDeleter> sockops_link_;
    Pins pins_;
    std::vector<MapAttachment> attachments_;
    // the maps the daemon reads and writes without system calls
    MappedArray<uint64_t> slot_states_;
    MappedArray<l7_pool> pools_;
    MappedArray<l7_conn_sync> conn_sync_;
    std::shared_ptr<BucketTable> buckets_;
    std::unique_ptr<::ring_buffer, RingDeleter> events_;
    const std::function<void(const l7_event&)>* consumer_ = nullptr;
    // the daemon's half of l7_conns (remote clients): which entries it uses
    std::vector<bool> remote_used_;
    uint32_t remote_cursor_ = 0;
    uint32_t remote_capacity_ = L7_MAX_CONNS - L7_CONNS_LOCAL;
    uint32_t active_gen_ = 0;
    l7_config config_{};
    TableWriter tables_;  // the policy tables in the maps
    // JWT providers written per generation (max_token == 0: not in the kernel)
    std::vector<l7_jwt_provider> jwt_providers_[L7_GENS];
    // the policy generation each slot holds (stage())
    uint64_t slot_generation_[L7_GENS] = {~0ull, ~0ull};
    // the slot holding `policy_generation` (staged or active), if any
    std::optional<uint32_t> slot_of(uint64_t policy_generation) const;
    int ncpus_ = 1;
    bool adopted_ = false;
    bool kfuncs_ = false;
};

}  // namespace l7fast::dataplane
