// The policy's JWT HMAC secrets in l7fast.ko's key table, where the module's
// pre-keyed HMAC kfunc (l7f_hmac_verify) finds them by key id. l7fastd owns
// that table while it runs: it installs the keys at start, again whenever
// they change (a reload, a JWKS file that changed), and removes them when it
// stops. The data plane's HS verifier (bpf/include/l7_jwtverify.h) calls the
// kfunc with the ids ids() gives, through its header entries.
//
// Generations: the table's ids are two halves, one per key epoch (epoch & 1).
// A new set of keys is installed into the other half in full first; only
// then are the previous epoch's ids deleted. A reader that looks keys up by
// (epoch, index) therefore sees either the old set whole or the new one,
// and a key that a reload removed or rotated is gone from the table once
// install() returns.
//
// Not thread-safe: the daemon calls it from its one io_context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "l7fast_kmodctl.h"  // uapi/l7fast_genl.h: enum l7fast_alg

namespace l7fast::dataplane {

// One HMAC key of a JWT provider.
struct ModuleKey {
    uint32_t provider = 0;  // index of the provider in the policy's order
    std::string kid;        // empty: a key for tokens without "kid"
    uint32_t alg = 0;       // enum l7fast_alg: L7FAST_ALG_HS256, _HS384 or _HS512
    std::string secret;     // the raw secret

    bool operator==(const ModuleKey&) const = default;
};

// Overwrites the secrets of `keys` (explicit_bzero) and empties the vector.
void wipe(std::vector<ModuleKey>& keys) noexcept;

class ModuleKeys {
public:
    // Keys per epoch: half of the module's table.
    static constexpr uint32_t kPerEpoch = 128;
    // The table id of the index-th key of `epoch`.
    static uint32_t id_of(uint32_t epoch, size_t index)
    {
        return (epoch & 1) * kPerEpoch + static_cast<uint32_t>(index);
    }

    // Connects to the module's generic-netlink family. Without the module
    // (or without CAP_NET_ADMIN) the object installs nothing and says why.
    ModuleKeys();
    // Removes the installed keys. (A restart that hands the data plane over
    // exits without destructors: the keys stay until the next l7fastd's
    // first install() replaces them.)
    ~ModuleKeys();
    ModuleKeys(const ModuleKeys&) = delete;
    ModuleKeys& operator=(const ModuleKeys&) = delete;

    bool available() const { return ctl_ != nullptr; }

    // Makes `keys` the table's content as the next epoch (the first
    // kPerEpoch of them; the rest stay with user-space verification). The
    // same keys as now: nothing changes. A key the module refuses (its
    // length, an algorithm this kernel's crypto API lacks) is left out and
    // the reason kept; a failure of the table itself (the module unloaded,
    // permission) leaves the previous epoch in place and returns false with
    // error() set. The first call of an instance clears every other id, so
    // nothing a previous l7fastd left behind survives it.
    //
    // `announce` is called with the epoch whose keys the table is about to
    // hold, before the first of them goes in, and again with the previous
    // epoch if the install fails (the data plane's l7_config.key_epoch: a
    // kernel reader checks that its header entry's epoch is that one before
    // and after a verification).
    bool install(const std::vector<ModuleKey>& keys,
                 const std::function<void(uint32_t epoch)>& announce = {});
    // The table id of each key of the last install(), in its order; -1 for
    // a key the module refused or that was beyond kPerEpoch.
    const std::vector<int32_t>& ids() const { return ids_; }
    // Whether the last install() that succeeded was given exactly `keys`
    // (so ids() are theirs).
    bool holds(const std::vector<ModuleKey>& keys) const { return cleared_ && keys == wanted_; }
    // Deletes every key this instance installed.
    void remove_all();
    uint32_t epoch() const { return epoch_; }
    size_t installed() const { return installed_; }
    // keys of the last install() the module does not hold
    size_t left_out() const { return wanted_.size() - installed_; }
    const std::string& error() const { return error_; }

    // For l7fastctl status: "none: <why>", or "N JWT HMAC keys in l7fast.ko
    // (key epoch E)" with what was left out and the last failure.
    std::string summary() const;

private:
    int add(uint32_t id, const ModuleKey& k);
    int del(uint32_t id);

    l7fast_kmodctl* ctl_ = nullptr;
    std::string absent_;                // why there is no connection
    // what the last install() was given (its secrets wiped when replaced
    // and at destruction)
    std::vector<ModuleKey> wanted_;
    std::vector<int32_t> ids_;  // per key of wanted_
    size_t installed_ = 0;  // in the table now: ids id_of(epoch_, 0 .. installed_-1)
    uint32_t epoch_ = 0;
    bool cleared_ = false;  // ids of earlier instances deleted
    std::string left_out_reason_;
    std::string error_;
};

}  // namespace l7fast::dataplane
