#include "dataplane/Dataplane.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>

#include "common/Log.hpp"
#include "dataplane/MapIo.hpp"
#include "dataplane/TestFault.hpp"
#include "l7fast.skel.h"
#include "compiler/PolicyCompiler.hpp"

namespace fs = std::filesystem;

namespace l7fast::dataplane {
namespace {

// libbpf's own messages go to our log; the last warning and information
// lines are kept so a verifier rejection can be explained in the error that
// stops the daemon.
std::mutex g_libbpf_mu;
std::deque<std::string> g_libbpf_tail;

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap)
{
    // One call can carry a whole verifier log (thousands of lines, the
    // reason for a rejection at its end): keep all of it, line by line.
    va_list copy;
    va_copy(copy, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n <= 0)
        return n;
    std::string text(static_cast<size_t>(n) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), fmt, ap);
    text.resize(static_cast<size_t>(n));
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos)
            end = text.size();
        std::string line = text.substr(start, end - start);
        start = end + 1;
        // debug lines (map creation, pinning and unpinning: a failed load
        // unpins every map it pinned) would push the reason out
        if (line.empty() || level == LIBBPF_DEBUG)
            continue;
        {
            std::lock_guard<std::mutex> lock(g_libbpf_mu);
            g_libbpf_tail.push_back(line);
            if (g_libbpf_tail.size() > 40)
                g_libbpf_tail.pop_front();
        }
        if (level == LIBBPF_WARN)
            log::debug("libbpf: ", line);
    }
    return n;
}

// What each program cost the verifier (bpf_prog_info.verified_insns, Linux
// 5.16+) against the 1M instructions it may process: a kernel update whose
// verifier prunes less can push a program over (6.18.44 did, ARCHITECTURE
// §7), so every start logs the margin and warns when it is thin.
void log_verifier_cost(bpf_object* obj)
{
    constexpr uint64_t kLimit = 1'000'000;  // BPF_COMPLEXITY_LIMIT_INSNS
    std::string costs, thin;
    bpf_program* p = nullptr;
    bpf_object__for_each_program(p, obj)
    {
        const int fd = bpf_program__fd(p);
        bpf_prog_info info{};
        uint32_t len = sizeof(info);
        if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || info.verified_insns == 0)
            continue;
        const std::string entry = std::string(bpf_program__name(p)) + " " + std::to_string(info.verified_insns);
        costs += (costs.empty() ? "" : ", ") + entry;
        if (info.verified_insns > kLimit * 3 / 4)
            thin += (thin.empty() ? "" : ", ") + entry;
    }
    if (costs.empty())
        return;  // a kernel before 5.16 does not say
    log::info("data plane verified (instructions processed, limit 1000000 each): ", costs);
    if (!thin.empty())
        log::warning("the verifier processed over 3/4 of its limit for ", thin,
                     ": a kernel whose verifier prunes less may reject the data plane");
}

std::string libbpf_tail(size_t lines)
{
    std::lock_guard<std::mutex> lock(g_libbpf_mu);
    std::string out;
    size_t start = g_libbpf_tail.size() > lines ? g_libbpf_tail.size() - lines : 0;
    for (size_t i = start; i < g_libbpf_tail.size(); i++)
        out += "\n  " + g_libbpf_tail[i];
    return out;
}

// What is pinned under a pin directory (maps/, links/), not the directory.
void remove_pins_under(const std::string& dir)
{
    std::error_code ec;
    for (const auto& sub : {"maps", "links"})
        fs::remove_all(fs::path(dir) / sub, ec);
}

}  // namespace

template <class T>
MappedArray<T>::MappedArray(int map_fd, uint32_t entries, const char* what) : what_(what)
{
    // the kernel lays array values out 8-byte aligned: T must be too
    static_assert(sizeof(T) % 8 == 0, "an mmapped array's value is a multiple of 8 bytes");
    len_ = (entries * sizeof(T) + 4095) & ~size_t(4095);
    fd_ = ::fcntl(map_fd, F_DUPFD_CLOEXEC, 3);
    if (fd_ < 0)
        throw DataplaneError(std::string("mapping ") + what + ": " + errstr(errno));
    // the address range only: no access, nothing resident, no commit charge
    void* p = ::mmap(nullptr, len_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        ::close(fd_);
        fd_ = -1;
        throw DataplaneError(std::string("mapping ") + what + ": " + errstr(err));
    }
    base_ = static_cast<T*>(p);
    entries_ = entries;
    window_.assign((len_ + kWindowBytes - 1) / kWindowBytes, 0);
    // the first window now: a map the kernel refuses to mmap fails here, at
    // start, not on first use
    if (int err = entries ? map_window(0) : 0) {
        reset();
        throw DataplaneError(std::string("mapping ") + what + ": " + errstr(err));
    }
}

template <class T>
int MappedArray<T>::map_window(size_t w) const
{
    const size_t start = w * kWindowBytes;
    const size_t n = std::min(kWindowBytes, len_ - start);
    void* p = ::mmap(reinterpret_cast<char*>(base_) + start, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                     fd_, static_cast<off_t>(start));
    if (p == MAP_FAILED) {
        window_[w] = 2;
        return errno;
    }
    window_[w] = 1;
    return 0;
}

template <class T>
T* MappedArray<T>::at(uint32_t i) const
{
    if (i >= entries_)
        return nullptr;
    // an entry can straddle two windows: both are mapped (adjacent in the
    // reserved range, so the entry is contiguous)
    const size_t off = size_t(i) * sizeof(T);
    for (size_t w = off / kWindowBytes; w <= (off + sizeof(T) - 1) / kWindowBytes; w++) {
        if (window_[w] == 1)
            continue;
        if (window_[w] == 2)
            return nullptr;
        if (int err = map_window(w)) {
            log::error("cannot map bytes ", w * kWindowBytes, "+", kWindowBytes, " of ", what_, ": ", errstr(err),
                       "; the connections or pooled upstreams whose entries are there cannot use the kernel path; "
                       "restart l7fastd");
            return nullptr;
        }
    }
    return base_ + i;
}

template <class T>
size_t MappedArray<T>::windows_mapped() const
{
    size_t n = 0;
    for (uint8_t w : window_)
        n += w == 1;
    return n;
}

template <class T>
void MappedArray<T>::reset() noexcept
{
    if (base_)
        ::munmap(base_, len_);
    if (fd_ >= 0)
        ::close(fd_);
    base_ = nullptr;
    entries_ = 0;
    len_ = 0;
    fd_ = -1;
    window_.clear();
}

template <class T>
MappedArray<T>::~MappedArray()
{
    reset();
}

template <class T>
MappedArray<T>& MappedArray<T>::operator=(MappedArray&& o) noexcept
{
    if (this != &o) {
        reset();
        base_ = o.base_;
        entries_ = o.entries_;
        len_ = o.len_;
        fd_ = o.fd_;
        what_ = o.what_;
        window_ = std::move(o.window_);
        o.base_ = nullptr;
        o.entries_ = 0;
        o.len_ = 0;
        o.fd_ = -1;
        o.window_.clear();
    }
    return *this;
}

template class MappedArray<uint64_t>;
template class MappedArray<l7_pool>;
template class MappedArray<l7_conn_sync>;

BucketTable::BucketTable(int map_fd, uint32_t entries, int keys_fd, int take_fd)
    : entries_(map_fd, entries, "l7_buckets"), used_(entries, false)
{
    if (keys_fd >= 0 && take_fd >= 0) {
        keys_fd_.reset(fcntl(keys_fd, F_DUPFD_CLOEXEC, 3));
        take_fd_.reset(fcntl(take_fd, F_DUPFD_CLOEXEC, 3));
        if (!keys_fd_.valid() || !take_fd_.valid())
            throw DataplaneError("duplicating the keyed rate limits' descriptors: " + errstr(errno));
    }
}

// l7_rate_keys[id]: a fresh table of `entries` keys' buckets (the outer map
// holds the only reference once it is in).
bool BucketTable::make_keys_table(uint32_t id, uint64_t entries)
{
    LIBBPF_OPTS(bpf_map_create_opts, o);
    Fd t(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "l7_rate_key", sizeof(l7_rate_key), sizeof(__u64),
                        static_cast<uint32_t>(entries), &o));
    if (!t.valid()) {
        log::warning("cannot make the kernel's table of ", entries, " rate-limit keys (", errstr(errno),
                     "): that keyed rate limit runs in user space");
        return false;
    }
    const int fd = t.get();
    if (bpf_map_update_elem(keys_fd_.get(), &id, &fd, BPF_ANY) != 0) {
        log::warning("cannot install the kernel's table of rate-limit keys (", errstr(errno),
                     "): that keyed rate limit runs in user space");
        return false;
    }
    return true;
}

std::optional<SharedBucket> BucketTable::lease(std::optional<uint32_t> max_keys)
{
    uint64_t keys = 0;
    if (max_keys) {
        const long cpus = libbpf_num_possible_cpus();
        keys = uint64_t{*max_keys} + uint64_t{kLruSlack} * static_cast<uint64_t>(cpus > 0 ? cpus : 1);
        if (!keys_fd_.valid() || kernel_keys_ + keys > kMaxKernelKeys)
            return std::nullopt;
    }
    const auto n = static_cast<uint32_t>(used_.size());
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t id = (cursor_ + k) % n;
        if (used_[id])
            continue;
        uint64_t* e = entries_.at(id);
        if (!e || (keys && !make_keys_table(id, keys)))
            return std::nullopt;
        used_[id] = true;
        leased_++;
        kernel_keys_ += keys;
        cursor_ = (id + 1) % n;
        __atomic_store_n(e, uint64_t{0}, __ATOMIC_SEQ_CST);
        SharedBucket l;
        l.id = id;
        l.state = reinterpret_cast<__u64*>(e);
        l.lease = std::shared_ptr<void>(e, [table = shared_from_this(), id, keys](void*) {
            if (keys)
                bpf_map_delete_elem(table->keys_fd_.get(), &id);
            table->kernel_keys_ -= keys;
            table->used_[id] = false;
            table->leased_--;
        });
        if (keys)
            l.take_key = [table = shared_from_this(), id](const l7_rate_key& key, uint32_t rate,
                                                          uint32_t burst) -> std::optional<uint64_t> {
                l7_rate_take_args a{};
                a.bucket = id;
                a.rate = rate;
                a.burst = burst;
                a.key = key;
                LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &a, .ctx_size_in = sizeof(a));
                if (bpf_prog_test_run_opts(table->take_fd_.get(), &run) != 0 || run.retval != 0)
                    return std::nullopt;
                return a.wait;
            };
        return l;
    }
    return std::nullopt;
}

Dataplane::Dataplane(const DataplaneOptions& opts) : opts_(opts)
{
    libbpf_set_print(libbpf_print);
    ncpus_ = libbpf_num_possible_cpus();
    if (ncpus_ <= 0)
        throw DataplaneError("cannot count possible CPUs: " + errstr(ncpus_));

    std::string why;
    if (opts_.adopt && !pins_adoptable(&why))
        log::notice("not adopting the pinned data plane in ", opts_.bpffs, ": ", why,
                    "; starting clean (open connections are closed)");
    kfuncs_ = opts_.kfuncs;
    try {
        if (!(opts_.adopt && why.empty() && load(true)))
            load(false);
    } catch (const DataplaneError& e) {
        if (!kfuncs_)
            throw;
        log::warning("the data plane did not load with l7fast.ko's kfuncs (", e.what(),
                     "); loading it without them: HS tokens are verified in user space (and cached)");
        kfuncs_ = false;
        load(false);
    }
    // from here on every resource is a member that releases itself, in order,
    // if the rest throws
    pins_ = Pins(opts_.bpffs);
    tables_ = TableWriter(TableMaps::of(skel_->obj));
    attach();
    if (adopted_)
        recover_state();
    else
        pin();
    slot_states_ = MappedArray<uint64_t>(bpf_map__fd(skel_->maps.l7_slot_state), L7_MAX_SLOTS,
                                         "l7_slot_state");
    pools_ = MappedArray<l7_pool>(bpf_map__fd(skel_->maps.l7_pools), L7_MAX_POOLS, "l7_pools");
    conn_sync_ = MappedArray<l7_conn_sync>(bpf_map__fd(skel_->maps.l7_conn_sync), L7_MAX_CONNS,
                                           "l7_conn_sync");
    // adopted buckets are not: a restart starts every limiter afresh
    buckets_ = std::make_shared<BucketTable>(bpf_map__fd(skel_->maps.l7_buckets), L7_MAX_BUCKETS,
                                             bpf_map__fd(skel_->maps.l7_rate_keys),
                                             bpf_program__fd(skel_->progs.l7_rate_take_user));
    if (const auto& f = test_faults(); f.conns_max)
        remote_capacity_ = *f.conns_max;
    remote_used_.assign(L7_MAX_CONNS - L7_CONNS_LOCAL, false);
    for (const auto& [k, r] : conn_refs())
        if (r.idx >= L7_CONNS_LOCAL && r.idx < L7_MAX_CONNS)
            remote_used_[r.idx - L7_CONNS_LOCAL] = true;
    events_.reset(ring_buffer__new(bpf_map__fd(skel_->maps.l7_events), &Dataplane::on_event, this, nullptr));
    if (!events_)
        throw DataplaneError("opening the event ring: " + errstr(errno));
    config_.ingress_budget = opts_.ingress_budget;
    config_.abi_version = L7_ABI_VERSION;
    // header entries name module key ids of an earlier instance's epochs,
    // cached tokens were verified under its policies and keys
    jwt_delete_gen(skel_->maps.l7_jwt_headers, std::nullopt);
    TableWriter::delete_kids_gen(bpf_map__fd(skel_->maps.l7_jwt_kids), std::nullopt);
    renew_cache_tag();
    refresh_wall_clock();
    write_config();
}

// Opens and loads the object. Its maps are pinned by name under
// <bpffs>/maps (LIBBPF_PIN_BY_NAME, bpf/include/l7_maps.h): with `adopt`,
// libbpf reuses the pins there, else they are removed first and libbpf
// pins the new maps. Returns false when adopting failed (the caller retries
// clean); throws when the kernel rejects the programs.
bool Dataplane::load(bool adopt)
{
    const std::string maps_dir = (fs::path(opts_.bpffs) / "maps").string();
    LIBBPF_OPTS(bpf_object_open_opts, open_opts, .pin_root_path = maps_dir.c_str());
    skel_.reset(l7fast_bpf__open_opts(&open_opts));
    if (!skel_)
        throw DataplaneError("opening the embedded BPF object: " + errstr(errno));
    // load-time specialisation: the verifier prunes what these disable
    skel_->rodata->cfg_trace = opts_.trace ? 1 : 0;
    skel_->rodata->cfg_kfuncs = kfuncs_ ? 1 : 0;
    // scratch entries per possible CPU (l7_scratch, bpf/include/l7_maps.h)
    bpf_map__set_max_entries(skel_->maps.l7_scratch, static_cast<uint32_t>(ncpus_) * L7_SCRATCH_SLOTS);
    if (!adopt) {
        std::error_code ec;
        // A previous instance that died leaves its pins; they describe state
        // this instance does not adopt, so they go. (The directory itself
        // stays: the daemon holds its lock, BpffsLock.)
        if (!fs::is_empty(opts_.bpffs, ec) && !ec) {
            log::notice("removing stale data-plane pins in ", opts_.bpffs);
            remove_pins_under(opts_.bpffs);
        }
    }
    if (std::string fault = apply_test_faults(skel_.get()); !fault.empty()) {
        skel_.reset();
        throw DataplaneError(fault);
    }
    std::error_code dir_ec;
    fs::create_directories(maps_dir, dir_ec);  // where the maps pin themselves
    int err = l7fast_bpf__load(skel_.get());
    if (err) {
        skel_.reset();
        // libbpf unpinned what it pinned; the directory it pinned into goes
        // too (an adopted one is the previous daemon's: the clean retry
        // decides)
        if (!adopt)
            remove_pins_under(opts_.bpffs);
        if (adopt) {
            log::notice("cannot adopt the pinned data-plane maps (", errstr(err),
                        "): starting clean (open connections are closed)");
            return false;
        }
        throw DataplaneError("the kernel rejected the data plane (" + errstr(err) +
                             "); verifier/libbpf said:" + libbpf_tail(12));
    }
    log_verifier_cost(skel_->obj);
    adopted_ = adopt;
    return true;
}

bool Dataplane::pins_adoptable(std::string* why) const
{
    std::string cfg = (fs::path(opts_.bpffs) / "maps" / "l7_config").string();
    int fd = bpf_obj_get(cfg.c_str());
    if (fd < 0) {
        *why = "nothing pinned (" + errstr(errno) + ")";
        return false;
    }
    Fd guard(fd);
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    uint32_t zero = 0;
    l7_config c{};
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || info.value_size != sizeof(c) ||
        bpf_map_lookup_elem(fd, &zero, &c) != 0) {
        *why = "the pinned maps are of another layout";
        return false;
    }
    if (c.abi_version != L7_ABI_VERSION) {
        *why = "the pinned maps are of ABI " + std::to_string(c.abi_version) + ", this is " +
               std::to_string(L7_ABI_VERSION);
        return false;
    }
    std::error_code ec;
    if (!fs::exists(fs::path(opts_.bpffs) / "links" / "sockops", ec)) {
        *why = "no pinned sockops link";
        return false;
    }
    return true;
}

// After adopting: the configuration and the string keys of both
// generations as the previous daemon left them.
void Dataplane::recover_state()
{
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_config), &zero, &config_) != 0)
        throw DataplaneError("reading the adopted l7_config: " + errstr(errno));
    active_gen_ = config_.active_gen & 1;
    tables_.adopt_strings();
}

Dataplane::~Dataplane() = default;

void Dataplane::SkelDeleter::operator()(::l7fast_bpf* s) const noexcept { l7fast_bpf__destroy(s); }
void Dataplane::LinkDeleter::operator()(::bpf_link* l) const noexcept { bpf_link__destroy(l); }
void Dataplane::RingDeleter::operator()(::ring_buffer* r) const noexcept { ring_buffer__free(r); }

Dataplane::MapAttachment::~MapAttachment()
{
    if (prog_fd_ >= 0)
        bpf_prog_detach2(prog_fd_, map_fd_, static_cast<bpf_attach_type>(type_));
}

Dataplane::Pins& Dataplane::Pins::operator=(Pins&& o) noexcept
{
    if (this != &o) {
        remove();
        dir_ = std::move(o.dir_);
        o.dir_.clear();
    }
    return *this;
}

Dataplane::Pins::~Pins() { remove(); }

void Dataplane::Pins::remove() noexcept
{
    if (dir_.empty())
        return;
    remove_pins_under(dir_);
    std::error_code ec;
    fs::remove(dir_, ec);  // empty now; the lock goes with the daemon
    dir_.clear();
}

// Handing over: the pins keep the maps and the link (and so the programs
// attached to the maps) alive for the next daemon.
void Dataplane::handover()
{
    for (auto& a : attachments_)
        a.keep();
    pins_.keep();
}

void Dataplane::attach()
{
    cgroup_fd_.reset(::open(opts_.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup_fd_.valid())
        throw DataplaneError("opening cgroup " + opts_.cgroup + ": " + errstr(errno));
    std::string link_pin = (fs::path(opts_.bpffs) / "links" / "sockops").string();
    if (adopted_) {
        // the pinned link stays attached; it runs this instance's program
        sockops_link_.reset(bpf_link__open(link_pin.c_str()));
        if (!sockops_link_)
            throw DataplaneError("opening the pinned sockops link: " + errstr(errno));
        int err = bpf_link__update_program(sockops_link_.get(), skel_->progs.l7_sockops);
        if (err)
            throw DataplaneError("updating the pinned sockops link: " + errstr(err));
    } else {
        sockops_link_.reset(bpf_program__attach_cgroup(skel_->progs.l7_sockops, cgroup_fd_.get()));
        if (!sockops_link_) {
            int e = errno;
            throw DataplaneError("attaching sockops to " + opts_.cgroup + ": " + errstr(e));
        }
    }
    struct {
        bpf_program* prog;
        bpf_map* map;
        bpf_attach_type type;
    } const table[] = {
        {skel_->progs.l7_req_msg, skel_->maps.l7_sk_client, BPF_SK_MSG_VERDICT},
        {skel_->progs.l7_resp_msg, skel_->maps.l7_sk_backend, BPF_SK_MSG_VERDICT},
        {skel_->progs.l7_req_skb, skel_->maps.l7_sk_remote, BPF_SK_SKB_VERDICT},
        {skel_->progs.l7_remote_out_msg, skel_->maps.l7_sk_remote, BPF_SK_MSG_VERDICT},
        {skel_->progs.l7_resp_skb, skel_->maps.l7_sk_upstream, BPF_SK_SKB_VERDICT},
    };
    // Programs must be attached to a sockmap before sockets are inserted:
    // a socket takes the programs present when it joins.
    for (const auto& a : table) {
        int pfd = bpf_program__fd(a.prog), mfd = bpf_map__fd(a.map);
        if (bpf_prog_attach(pfd, mfd, a.type, 0) != 0)
            throw DataplaneError(std::string("attaching ") + bpf_program__name(a.prog) + " to " +
                                 bpf_map__name(a.map) + ": " + errstr(errno));
        attachments_.emplace_back(pfd, mfd, a.type);
    }
}

// The sockops link, pinned for the next l7fastd (the maps pinned
// themselves at load).
void Dataplane::pin()
{
    std::error_code ec;
    fs::path dir(opts_.bpffs);
    fs::create_directories(dir / "maps", ec);
    fs::create_directories(dir / "links", ec);
    if (ec)
        throw DataplaneError("creating " + dir.string() + ": " + ec.message());
    std::string link_path = (dir / "links" / "sockops").string();
    if (bpf_link__pin(sockops_link_.get(), link_path.c_str()) != 0)
        throw DataplaneError("pinning the sockops link: " + errstr(errno));
}

void Dataplane::write_config()
{
    uint32_t zero = 0;
    update_or_throw(bpf_map__fd(skel_->maps.l7_config), &zero, &config_, "l7_config");
}

void Dataplane::set_enabled(bool on)
{
    if (on)
        config_.flags |= L7_CF_ENABLED;
    else
        config_.flags &= ~L7_CF_ENABLED;
    write_config();
}

void Dataplane::set_ingress_budget(uint32_t bytes)
{
    config_.ingress_budget = bytes;
    write_config();
}

void Dataplane::set_raw_pool(uint32_t pool)
{
    config_.raw_pool = pool;
    write_config();
}

void Dataplane::set_access_log_sample(uint32_t n)
{
    if (config_.access_log_sample == n)
        return;
    config_.access_log_sample = n;
    write_config();
}

uint32_t Dataplane::stage(const policy::CompiledTables& t, std::span<const uint32_t> listener_ids,
                          uint64_t policy_generation)
{
    const uint32_t gen = active_gen_ ^ 1;

    tables_.write(t, listener_ids, gen);

    // JWT: the slot's cached tokens were verified by the policy it held
    // before; none may be admitted under this one, and its header entries
    // and kids name that policy's keys (set_jwt_headers and set_jwt_kids
    // write this one's)
    jwt_delete_gen(skel_->maps.l7_jwt_cache, gen);
    jwt_delete_gen(skel_->maps.l7_jwt_headers, gen);
    TableWriter::delete_kids_gen(bpf_map__fd(skel_->maps.l7_jwt_kids), gen);
    slot_generation_[gen] = policy_generation;
    jwt_providers_[gen].assign(L7_MAX_JWT_PROVIDERS, l7_jwt_provider{});
    for (size_t i = 0; i < t.jwt_providers.size() && i < L7_MAX_JWT_PROVIDERS; i++)
        jwt_providers_[gen][i] = t.jwt_providers[i];

    // meta of the new generation (readers still use the other one)
    config_.meta[gen] = t.meta;
    write_config();
    return gen;
}

void Dataplane::activate(uint32_t gen, uint64_t policy_generation)
{
    // only active_gen changes between the two writes: the bytes a reader of
    // either generation uses never change under it
    config_.active_gen = gen & 1;
    config_.generation = policy_generation;
    config_.flags |= L7_CF_ENABLED;
    renew_cache_tag();
    write_config();
    active_gen_ = gen & 1;
}

void Dataplane::renew_cache_tag()
{
    if (config_.cache_tag == 0) {
        uint64_t r = 0;
        if (::getrandom(&r, sizeof(r), 0) != static_cast<ssize_t>(sizeof(r)))
            r = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
        config_.cache_tag = r | 1;  // 0 is the harnesses' (and never set)
        return;
    }
    config_.cache_tag++;
    if (config_.cache_tag == 0)
        config_.cache_tag = 1;
}

void Dataplane::jwt_delete_gen(const ::bpf_map* map, std::optional<uint32_t> gen)
{
    TableWriter::delete_jwt_gen(bpf_map__fd(map), bpf_map__name(map), gen);
}

std::optional<Dataplane::JwtCacheTarget> Dataplane::jwt_cache_target(uint64_t policy_generation,
                                                                     uint32_t provider) const
{
    const auto& providers = jwt_providers_[active_gen_ & 1];
    if (!(config_.flags & L7_CF_ENABLED) || policy_generation != config_.generation ||
        provider >= providers.size() || providers[provider].max_token == 0)
        return std::nullopt;
    JwtCacheTarget t;
    t.gen = active_gen_ & 1;
    t.seed = config_.meta[t.gen].seed;
    t.max_token = providers[provider].max_token;
    t.tag = config_.cache_tag;
    return t;
}

bool Dataplane::jwt_cache_put(const l7_jwt_key& k, const l7_jwt_entry& e)
{
    return bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_jwt_cache), &k, &e, BPF_ANY) == 0;
}

void Dataplane::jwt_cache_clear() { jwt_delete_gen(skel_->maps.l7_jwt_cache, std::nullopt); }

void Dataplane::set_key_epoch(uint32_t epoch)
{
    if (config_.key_epoch == epoch)
        return;
    config_.key_epoch = epoch;
    // a token cached under the old keys is verified again
    renew_cache_tag();
    write_config();
}

std::optional<uint32_t> Dataplane::slot_of(uint64_t policy_generation) const
{
    for (uint32_t gen = 0; gen < L7_GENS; gen++)
        if (slot_generation_[gen] == policy_generation)
            return gen;
    return std::nullopt;
}

size_t Dataplane::set_jwt_headers(uint64_t policy_generation, uint32_t epoch,
                                  const std::vector<JwtHeaderEntry>& headers)
{
    const auto gen = slot_of(policy_generation);
    return gen ? tables_.write_jwt_headers(*gen, config_.meta[*gen].seed, epoch, headers) : 0;
}

size_t Dataplane::set_jwt_kids(uint64_t policy_generation, uint32_t epoch, const std::vector<JwtKidEntry>& kids)
{
    const auto gen = slot_of(policy_generation);
    return gen ? tables_.write_jwt_kids(*gen, epoch, kids) : 0;
}

size_t Dataplane::jwt_header_entries() const
{
    size_t n = 0;
    for (const auto& k : map_keys<l7_jwt_key>(bpf_map__fd(skel_->maps.l7_jwt_headers)))
        n += k.gen == (active_gen_ & 1);
    return n;
}

size_t Dataplane::jwt_kid_entries() const
{
    size_t n = 0;
    for (const auto& k : map_keys<l7_jwt_kid_key>(bpf_map__fd(skel_->maps.l7_jwt_kids)))
        n += k.gen == (active_gen_ & 1) && k.len != L7_JWT_KIDS_ALL;
    return n;
}

void Dataplane::refresh_wall_clock()
{
    timespec real{}, boot{};
    ::clock_gettime(CLOCK_REALTIME, &real);
    ::clock_gettime(CLOCK_BOOTTIME, &boot);
    const int64_t off = (static_cast<int64_t>(real.tv_sec) - boot.tv_sec) * 1000000000 +
                        (static_cast<int64_t>(real.tv_nsec) - boot.tv_nsec);
    const int64_t moved = off - config_.wall_off_ns;
    if (config_.wall_off_ns != 0 && moved < 1000000 && moved > -1000000)
        return;
    config_.wall_off_ns = off;
    write_config();
}

size_t Dataplane::jwt_cache_entries() const
{
    return map_keys<l7_jwt_key>(bpf_map__fd(skel_->maps.l7_jwt_cache)).size();
}

void Dataplane::drain_route_counters(uint32_t gen, uint32_t n_routes, std::vector<RouteCounters>& out)
{
    int fd = bpf_map__fd(skel_->maps.l7_route_stats);
    std::vector<l7_route_stats> zero(ncpus_);
    if (out.size() < n_routes)
        out.resize(n_routes);
    for (uint32_t i = 0; i < n_routes && i < L7_MAX_ROUTES; i++) {
        out[i] += route_counters(gen, i);
        uint32_t k = gen * L7_MAX_ROUTES + i;
        bpf_map_update_elem(fd, &k, zero.data(), BPF_ANY);
    }
}

std::optional<ConnRef> Dataplane::conn_of(const l7_conn_key& k) const
{
    l7_sk_ref r{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_conn_by_tuple), &k, &r) != 0 ||
        r.kind != L7_REF_CLIENT || r.idx >= L7_MAX_CONNS)
        return std::nullopt;
    return ConnRef{r.idx, r.gen};
}

std::array<std::array<uint64_t, 2>, 2> Dataplane::connection_modes() const
{
    std::array<std::array<uint64_t, 2>, 2> out{};
    const int fd = bpf_map__fd(skel_->maps.l7_conns);
    constexpr uint32_t kBatch = 4096;
    std::vector<uint32_t> keys(kBatch);
    std::vector<l7_conn> values(kBatch);
    uint32_t next = 0;
    bool first = true;
    // an array map: L7_MAX_CONNS entries, kBatch at a time; the last batch
    // ends with ENOENT
    for (uint32_t done = 0; done < L7_MAX_CONNS;) {
        uint32_t count = kBatch;
        const int r = bpf_map_lookup_batch(fd, first ? nullptr : &next, &next, keys.data(), values.data(), &count,
                                           nullptr);
        const int err = r < 0 ? errno : 0;
        if (r < 0 && err != ENOENT) {
            log::warning("cannot read l7_conns to count connections: ", std::strerror(err));
            break;
        }
        first = false;
        for (uint32_t i = 0; i < count; i++) {
            const l7_conn& c = values[i];
            if (c.state == L7_CONN_USED)
                out[c.mode == L7_MODE_USER ? 1 : 0][c.side == L7_SIDE_REMOTE ? 1 : 0]++;
        }
        done += count;
        if (err == ENOENT || count == 0)
            break;
    }
    return out;
}

std::optional<l7_conn> Dataplane::conn(ConnRef r) const
{
    l7_conn c{};
    if (!r.valid() || bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_conns), &r.idx, &c) != 0 ||
        c.state != L7_CONN_USED || c.gen != r.gen)
        return std::nullopt;
    return c;
}

namespace {

std::optional<uint64_t> socket_cookie(int fd)
{
    uint64_t cookie = 0;
    socklen_t len = sizeof(cookie);
    if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0)
        return std::nullopt;
    return cookie;
}

}  // namespace

ConnRef Dataplane::conn_create_remote(const l7_conn_key& k, uint32_t listener_id, int fd)
{
    const uint32_t half = L7_MAX_CONNS - L7_CONNS_LOCAL;
    std::optional<uint32_t> idx;
    uint32_t in_use = 0;
    for (bool u : remote_used_)
        in_use += u;
    for (uint32_t i = 0; i < half && in_use < remote_capacity_; i++) {
        uint32_t cand = (remote_cursor_ + i) % half;
        if (!remote_used_[cand]) {
            idx = L7_CONNS_LOCAL + cand;
            remote_cursor_ = (cand + 1) % half;
            break;
        }
    }
    auto cookie = socket_cookie(fd);
    if (!idx || !cookie) {
        note_map_update_failure("l7_conns", idx ? errno : E2BIG, "new client connections take the slow path");
        return {};
    }
    int cfd = bpf_map__fd(skel_->maps.l7_conns);
    l7_conn c{};
    bpf_map_lookup_elem(cfd, &*idx, &c);  // for its gen
    uint32_t gen = c.gen + 1;
    c = l7_conn{};
    c.state = L7_CONN_USED;
    c.gen = gen;
    c.key = k;
    c.listener_id = listener_id;
    c.mode = L7_MODE_KERNEL;
    c.side = L7_SIDE_REMOTE;
    c.last_slot = L7_NO_SLOT;
    ConnRef ref{*idx, gen};
    l7_sk_ref r{};
    r.kind = L7_REF_CLIENT;
    r.idx = ref.idx;
    r.gen = ref.gen;
    l7_conn_sync* sy = conn_sync_.at(ref.idx);
    uint64_t v = static_cast<uint64_t>(fd);
    if (!sy || bpf_map_update_elem(cfd, &ref.idx, &c, BPF_ANY) != 0) {
        note_map_update_failure("l7_conns", errno, "new client connections take the slow path");
        return {};
    }
    *sy = l7_conn_sync{};
    sy->gen = gen;
    remote_used_[ref.idx - L7_CONNS_LOCAL] = true;
    const char* failed = nullptr;
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_conn_by_tuple), &k, &r, BPF_ANY) != 0)
        failed = "l7_conn_by_tuple";
    else if (bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_ref_by_cookie), &*cookie, &r, BPF_ANY) != 0)
        failed = "l7_ref_by_cookie";
    else if (bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_sk_remote), &ref.idx, &v, BPF_ANY) != 0)
        failed = "l7_sk_remote";
    if (failed) {
        int err = errno;
        conn_free(ref, k, fd);
        // a sockmap takes only ESTABLISHED sockets: a client that already
        // closed its side before l7fastd accepted it is served by the slow
        // path, and nothing is wrong with the maps
        if (err == EOPNOTSUPP && failed == std::string_view("l7_sk_remote"))
            log::debug("connection fd ", fd, " is no longer ESTABLISHED (the client closed its side): slow path");
        else
            note_map_update_failure(failed, err, "new client connections take the slow path");
        return {};
    }
    return ref;
}

void Dataplane::conn_free(ConnRef r, const l7_conn_key& k, int remote_fd)
{
    if (!r.valid())
        return;
    // the socket first: once the entry is free, sockops may hand its index
    // to a new connection, whose socket a late delete would remove
    if (remote_fd >= 0) {
        bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_sk_remote), &r.idx);
        if (auto cookie = socket_cookie(remote_fd))
            bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_ref_by_cookie), &*cookie);
    } else {
        bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_sk_client), &r.idx);
    }
    int tfd = bpf_map__fd(skel_->maps.l7_conn_by_tuple);
    l7_sk_ref cur{};
    if (bpf_map_lookup_elem(tfd, &k, &cur) == 0 && cur.idx == r.idx && cur.gen == r.gen)
        bpf_map_delete_elem(tfd, &k);
    int cfd = bpf_map__fd(skel_->maps.l7_conns);
    l7_conn c{};
    if (bpf_map_lookup_elem(cfd, &r.idx, &c) == 0 && c.state == L7_CONN_USED && c.gen == r.gen) {
        // a whole-value write: only the owner of a USED entry writes it
        // this way, and sockops allocates FREE ones only
        l7_conn freed{};
        freed.state = L7_CONN_FREE;
        freed.gen = c.gen;
        bpf_map_update_elem(cfd, &r.idx, &freed, BPF_ANY);
    }
    if (r.idx >= L7_CONNS_LOCAL)
        remote_used_[r.idx - L7_CONNS_LOCAL] = false;
}

bool Dataplane::conn_socket_present(ConnRef r, bool remote) const
{
    uint64_t cookie = 0;
    return r.valid() &&
           bpf_map_lookup_elem(bpf_map__fd(remote ? skel_->maps.l7_sk_remote : skel_->maps.l7_sk_client), &r.idx,
                               &cookie) == 0;
}

size_t Dataplane::forget_stale_cookies()
{
    int fd = bpf_map__fd(skel_->maps.l7_ref_by_cookie);
    size_t stale = 0;
    for (uint64_t cookie : map_keys<uint64_t>(fd)) {
        l7_sk_ref r{};
        if (bpf_map_lookup_elem(fd, &cookie, &r) != 0)
            continue;
        bool live = r.kind == L7_REF_CLIENT ? conn(ConnRef{r.idx, r.gen}).has_value()
                    : r.kind == L7_REF_SLOT  ? slot_state(r.idx) && *slot_state(r.idx) != L7_SLOT_EMPTY
                                             : false;
        if (!live) {
            bpf_map_delete_elem(fd, &cookie);
            stale++;
        }
    }
    return stale;
}

l7_conn_sync* Dataplane::conn_sync(ConnRef r) const { return r.valid() ? conn_sync_.at(r.idx) : nullptr; }

std::vector<std::pair<l7_conn_key, ConnRef>> Dataplane::conn_refs() const
{
    std::vector<std::pair<l7_conn_key, ConnRef>> out;
    int fd = bpf_map__fd(skel_->maps.l7_conn_by_tuple);
    for (const auto& k : map_keys<l7_conn_key>(fd)) {
        l7_sk_ref r{};
        if (bpf_map_lookup_elem(fd, &k, &r) == 0 && r.kind == L7_REF_CLIENT)
            out.emplace_back(k, ConnRef{r.idx, r.gen});
    }
    return out;
}

std::optional<uint32_t> Dataplane::slot_by_tuple(const l7_conn_key& k) const
{
    uint32_t id = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_slot_by_tuple), &k, &id) != 0)
        return std::nullopt;
    return id;
}

std::vector<std::pair<l7_conn_key, uint32_t>> Dataplane::slot_tuples() const
{
    std::vector<std::pair<l7_conn_key, uint32_t>> out;
    int fd = bpf_map__fd(skel_->maps.l7_slot_by_tuple);
    for (const auto& k : map_keys<l7_conn_key>(fd)) {
        uint32_t id = 0;
        if (bpf_map_lookup_elem(fd, &k, &id) == 0)
            out.emplace_back(k, id);
    }
    return out;
}

uint64_t* Dataplane::slot_state(uint32_t id) const { return slot_states_.at(id); }

l7_pool* Dataplane::pool(uint32_t pool_id) const { return pools_.at(pool_id); }

std::optional<l7_slot> Dataplane::slot(uint32_t id) const
{
    l7_slot s{};
    if (id >= L7_MAX_SLOTS || bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_slots), &id, &s) != 0)
        return std::nullopt;
    return s;
}

bool Dataplane::slot_write(uint32_t id, const l7_slot& s)
{
    return id < L7_MAX_SLOTS && bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_slots), &id, &s, BPF_ANY) == 0;
}

bool Dataplane::slot_register_tuple(const l7_conn_key& k, uint32_t id)
{
    return bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_slot_by_tuple), &k, &id, BPF_ANY) == 0;
}

void Dataplane::slot_unregister_tuple(const l7_conn_key& k)
{
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_slot_by_tuple), &k);
}

bool Dataplane::insert_upstream_socket(uint32_t id, int fd)
{
    uint64_t v = static_cast<uint64_t>(fd);
    auto cookie = socket_cookie(fd);
    l7_sk_ref r{};
    r.kind = L7_REF_SLOT;
    r.idx = id;
    return cookie && bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_ref_by_cookie), &*cookie, &r, BPF_ANY) == 0 &&
           bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_sk_upstream), &id, &v, BPF_ANY) == 0;
}

void Dataplane::remove_slot_sockets(uint32_t id, int fd)
{
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_sk_upstream), &id);
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_sk_backend), &id);
    if (auto cookie = fd >= 0 ? socket_cookie(fd) : std::nullopt)
        bpf_map_delete_elem(bpf_map__fd(skel_->maps.l7_ref_by_cookie), &*cookie);
}

int Dataplane::events_fd() const { return events_ ? ring_buffer__epoll_fd(events_.get()) : -1; }

int Dataplane::on_event(void* self, void* data, size_t size)
{
    auto* dp = static_cast<Dataplane*>(self);
    if (size >= sizeof(l7_event) && dp->consumer_) {
        l7_event ev;
        std::memcpy(&ev, data, sizeof(ev));
        (*dp->consumer_)(ev);
    }
    return 0;
}

int Dataplane::consume_events(const std::function<void(const l7_event&)>& fn)
{
    consumer_ = &fn;
    int n = ring_buffer__consume(events_.get());
    consumer_ = nullptr;
    return n;
}

RouteCounters Dataplane::route_counters(uint32_t gen, uint32_t route) const
{
    RouteCounters out;
    uint32_t k = gen * L7_MAX_ROUTES + route;
    std::vector<l7_route_stats> per(ncpus_);
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_route_stats), &k, per.data()) != 0)
        return out;
    for (const auto& s : per) {
        out.requests += s.requests_kernel;
        for (int i = 0; i < L7_STATUS_CLASSES; i++)
            out.status[i] += s.status[i];
        for (int i = 0; i < L7_N_KERNEL_CODES; i++)
            out.codes[i] += s.codes[i];
        out.bytes_in += s.bytes_in;
        out.bytes_out += s.bytes_out;
        for (int i = 0; i < L7_LAT_BUCKETS; i++)
            out.latency[i] += s.latency[i];
        out.direct_responses += s.direct_responses;
        out.rbac_denied += s.rbac_denied;
        out.jwt_missing += s.jwt_missing;
        out.jwt_invalid += s.jwt_invalid;
        out.rate_limited += s.rate_limited;
    }
    return out;
}

std::vector<uint64_t> Dataplane::rule_denials(uint32_t gen, uint32_t n_rules, bool drain)
{
    const int fd = bpf_map__fd(skel_->maps.l7_rule_denied);
    std::vector<uint64_t> out(std::min<uint32_t>(n_rules, L7_MAX_RULES), 0);
    std::vector<uint64_t> per(ncpus_);
    const std::vector<uint64_t> zero(ncpus_, 0);
    for (uint32_t i = 0; i < out.size(); i++) {
        uint32_t k = gen * L7_MAX_RULES + i;
        out[i] = percpu_sum(fd, k, per).value_or(0);
        if (drain && out[i])
            bpf_map_update_elem(fd, &k, zero.data(), BPF_ANY);
    }
    return out;
}

std::optional<uint64_t> Dataplane::percpu_sum(int fd, uint32_t key, std::vector<uint64_t>& per) const
{
    per.resize(ncpus_);
    if (bpf_map_lookup_elem(fd, &key, per.data()) != 0)
        return std::nullopt;
    uint64_t sum = 0;
    for (uint64_t v : per)
        sum += v;
    return sum;
}

RouteCounters Dataplane::pool_counters(uint32_t pool) const
{
    RouteCounters out;
    std::vector<l7_pool_stats> per(ncpus_);
    if (pool >= L7_MAX_POOLS ||
        bpf_map_lookup_elem(bpf_map__fd(skel_->maps.l7_pool_stats), &pool, per.data()) != 0)
        return out;
    for (const auto& s : per) {
        out.requests += s.responses;
        for (int i = 0; i < L7_STATUS_CLASSES; i++)
            out.status[i] += s.status[i];
        out.bytes_out += s.bytes_out;
        for (int i = 0; i < L7_LAT_BUCKETS; i++)
            out.latency[i] += s.latency[i];
    }
    return out;
}

void Dataplane::clear_pool_counters(uint32_t pool)
{
    std::vector<l7_pool_stats> zero(ncpus_);
    if (pool < L7_MAX_POOLS)
        bpf_map_update_elem(bpf_map__fd(skel_->maps.l7_pool_stats), &pool, zero.data(), BPF_ANY);
}

std::vector<uint64_t> Dataplane::counters() const
{
    std::vector<uint64_t> out(L7_C_COUNT, 0);
    std::vector<uint64_t> per(ncpus_);
    const int fd = bpf_map__fd(skel_->maps.l7_counters);
    for (uint32_t i = 0; i < L7_C_COUNT; i++)
        out[i] = percpu_sum(fd, i, per).value_or(0);
    return out;
}

uint64_t Dataplane::counter(uint32_t which) const
{
    std::vector<uint64_t> per(ncpus_);
    return percpu_sum(bpf_map__fd(skel_->maps.l7_counters), which, per).value_or(0);
}

}  // namespace l7fast::dataplane
