// The data plane's request decision run by the kernel, for the differential
// tests (tests/unit/compiler_differential_test.cpp, tests/fuzz/
// fuzz_match_diff.cpp, tests/kernel/jwt_verify_kernel_test.cpp):
// bpf/lib/decide.h compiled into a
// BPF_PROG_TYPE_SYSCALL harness (tests/support/bpf/decide_harness.bpf.c),
// over maps the daemon's own table writer fills (dataplane/Tables.cpp, the
// code Dataplane::stage runs). Needs root and BPF.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/Fd.hpp"
#include "dataplane/Tables.hpp"
#include "compiler/PolicyCompiler.hpp"

struct decide_harness_bpf;

namespace l7fast::testing {

inline constexpr uint32_t kNoPool = 0xffffffffu;
inline constexpr int kPicks = 4;  // DH_PICKS

enum class Verdict {
    Kernel,    // the kernel forwards it (RBAC, if any, allowed it) to the pool picked
    NoRoute,
    SlowPath,  // handed to the slow path (`reason` says why)
    RbacDeny,  // the kernel's rules pass denied (or could not decide)
    Unauthorized,  // the kernel answers a JWT route's 401 itself
    RateLimited,   // no token in the route's bucket: the 429 (`answered`: the kernel sends it)
};

struct Decision {
    Verdict verdict = Verdict::SlowPath;
    int route = -1;       // once routed
    uint32_t reason = 0;  // enum l7_reason
    std::array<uint32_t, kPicks> pools{};  // pool of each pick, kNoPool: none
    // RbacDeny: the kernel answers the denial itself (the route's resp_deny),
    // decided by the route's rule `rbac_rule` (-1: its default action)
    bool answered = false;
    int rbac_rule = -1;
    // Unauthorized: the 401 with error="invalid_token" (an empty or too large
    // token), else the one without (no token); `response` is its index in
    // the installed CompiledTables::responses
    bool token_presented = false;
    uint32_t response = 0;  // also RateLimited's 429, when answered
    uint32_t detail = 0;    // a token refused: L7_ANS_DETAIL_* (auth::kernel_refusal_reason)
};

// The inputs the harness takes from the test instead of the kernel, per
// pick: the round-robin counter of the route's cluster and the two random
// draws l7_pick_pool may make (a route's cluster among several, then an
// endpoint of a weighted cluster), in that order.
struct Pick {
    uint64_t rr = 0;
    uint32_t random[2] = {};
};

class BpfDecider {
public:
    struct Options {
        // string conditions hashed by the tests' colliding hash (the
        // compiler must be given the same: CompileOptions::string_hash =
        // weak_string_hash)
        bool weak_hash = false;
        // the HS verifier calls l7fast.ko's kfuncs (cfg_kfuncs): the module
        // must be loaded, on a kernel that lets syscall programs call them
        bool kfuncs = false;
    };
    // Loads the harness; throws std::runtime_error saying why it cannot
    // (not root, no BPF, the verifier's refusal).
    BpfDecider() : BpfDecider(Options{}) {}
    explicit BpfDecider(const Options& options);
    ~BpfDecider();
    BpfDecider(const BpfDecider&) = delete;
    BpfDecider& operator=(const BpfDecider&) = delete;

    // The tests' colliding hash: length % 3 plus the number of odd bytes.
    static uint64_t weak_string_hash(uint64_t seed, std::string_view s, bool lower);

    // Writes `t` into the inactive generation and makes it the active one,
    // as a reload does (Dataplane::activate: a new cache tag too); listeners
    // keep their policy order as stable ids.
    void install(const policy::CompiledTables& t);
    // False when two of t's string entries have one map key (one would
    // overwrite the other in l7_match) or an entry names a generation (the
    // writer's job) or a space that does not exist.
    static bool unique_string_keys(const policy::CompiledTables& t);

    // The decision on one request (its head and whatever follows) from a
    // client of listener `listener`.
    Decision decide(std::string_view request, uint32_t listener, const std::array<Pick, kPicks>& picks);

    // What bpf_ktime_get_boot_ns() returns to the following decisions (the
    // HS verifier's clock is it plus l7_config.wall_off_ns, 0 here); 0: the
    // kernel's own clock.
    void set_clock(uint64_t boot_ns) { now_ns_ = boot_ns; }
    // l7_config.key_epoch (and a new cache tag, as Dataplane::set_key_epoch
    // does), and the HS verifier's header entries of the active generation
    // (dataplane::TableWriter::write_jwt_headers, as
    // Dataplane::set_jwt_headers writes them); returns the number written.
    void set_key_epoch(uint32_t epoch);
    // l7_config.cache_tag: a new value, so no cached token is admitted.
    void renew_cache_tag();
    // The verified-token cache's entry for `token` of `provider` in the
    // active generation, if any.
    std::optional<l7_jwt_entry> cached(std::string_view token, uint32_t provider) const;
    size_t set_jwt_headers(uint32_t epoch, const std::vector<dataplane::JwtHeaderEntry>& headers);
    // And its kids (TableWriter::write_jwt_kids, as Dataplane::set_jwt_kids).
    size_t set_jwt_kids(uint32_t epoch, const std::vector<dataplane::JwtKidEntry>& kids);
    // The decision program's run count and total run time in ns, as the
    // kernel accounts them with kernel.bpf_stats_enabled=1.
    std::pair<uint64_t, uint64_t> run_stats() const;

    // The harness's rate-limit bucket `id` (l7_buckets; bpf/include/l7_bucket.h).
    uint64_t bucket(uint32_t id) const;
    void set_bucket(uint32_t id, uint64_t mark);
    // The harness's l7_buckets, l7_rate_keys and l7_rate_take_user: what a
    // dataplane::BucketTable over them needs (Dataplane gives the slow
    // path's limiters one over the data plane's).
    int buckets_fd() const;
    int rate_keys_fd() const;
    int rate_take_fd() const;
    // The bucket of `key` in the keyed table of bucket `id`, if it has one.
    std::optional<uint64_t> key_bucket(uint32_t id, const l7_rate_key& key) const;
    void set_key_bucket(uint32_t id, const l7_rate_key& key, uint64_t mark);
    // The client's address of the following decisions (AF_INET: ip[0..3]).
    void set_client(uint16_t family, const std::array<uint8_t, 16>& ip)
    {
        client_family_ = family;
        client_ip_ = ip;
    }

private:
    // Reads the harness's l7_config, applies `change`, writes it back.
    void change_config(const std::function<void(l7_config&)>& change);

    struct SkelDeleter {
        void operator()(::decide_harness_bpf* s) const noexcept;
    };
    std::unique_ptr<::decide_harness_bpf, SkelDeleter> skel_;
    int prog_fd_ = -1;
    dataplane::TableWriter tables_;
    uint32_t active_gen_ = 0;
    uint32_t n_clusters_ = 0;
    uint64_t seed_ = 0;  // the active generation's string seed
    uint64_t now_ns_ = 0;
    uint16_t client_family_ = 0;  // the harness's l7_conn_key zeroed, unless set
    std::array<uint8_t, 16> client_ip_{};

    Fd key_table(uint32_t id) const;
};

}  // namespace l7fast::testing
