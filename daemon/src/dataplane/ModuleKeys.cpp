#include "dataplane/ModuleKeys.hpp"

#include <string.h>

#include <cerrno>
#include <cstring>

#include "common/Log.hpp"

namespace l7fast::dataplane {
namespace {

static_assert(2 * ModuleKeys::kPerEpoch == L7FAST_MAX_KEYS, "two epochs fill the module's key table");

const char* alg_text(uint32_t alg)
{
    switch (alg) {
    case L7FAST_ALG_HS256:
        return "HS256";
    case L7FAST_ALG_HS384:
        return "HS384";
    case L7FAST_ALG_HS512:
        return "HS512";
    }
    return "?";
}

// What a failed call means for the operator.
std::string explain(int err, const char* kernel_says)
{
    std::string s = std::strerror(-err);
    if (kernel_says && *kernel_says)
        s += std::string(": ") + kernel_says;
    switch (-err) {
    case EPERM:
        s += " (l7fastd needs CAP_NET_ADMIN to change l7fast.ko's keys)";
        break;
    case ENOENT:
        s += " (l7fast.ko is not loaded: modprobe l7fast)";
        break;
    case EOPNOTSUPP:
        s += " (this kernel's crypto API lacks the algorithm; /sys/kernel/l7fast/algorithms lists what it has)";
        break;
    case EMSGSIZE:
        s += " (the module takes HMAC secrets of up to " + std::to_string(L7FAST_HMAC_KEY_MAX) + " bytes)";
        break;
    }
    return s;
}

std::string key_name(const ModuleKey& k)
{
    return std::string(alg_text(k.alg)) + " key " + (k.kid.empty() ? "without kid" : "\"" + k.kid + "\"") +
           " of provider " + std::to_string(k.provider);
}

}  // namespace

void wipe(std::vector<ModuleKey>& keys) noexcept
{
    for (auto& k : keys)
        if (!k.secret.empty())
            ::explicit_bzero(k.secret.data(), k.secret.size());
    keys.clear();
}

ModuleKeys::ModuleKeys()
{
    int r = l7fast_kmodctl_open(&ctl_);
    if (r < 0) {
        ctl_ = nullptr;
        absent_ = r == -ENOENT ? "l7fast.ko is not loaded (modprobe l7fast; package l7fast-dkms)"
                               : "cannot reach l7fast.ko's generic-netlink family: " + explain(r, nullptr);
    }
}

ModuleKeys::~ModuleKeys()
{
    remove_all();
    wipe(wanted_);
    l7fast_kmodctl_close(ctl_);
}

int ModuleKeys::add(uint32_t id, const ModuleKey& k)
{
    return l7fast_kmodctl_add_hmac_key(ctl_, id, k.alg, k.secret.data(), k.secret.size(), L7FAST_KEY_F_REPLACE);
}

int ModuleKeys::del(uint32_t id)
{
    int r = l7fast_kmodctl_del_key(ctl_, id);
    return r == -ENOENT ? 0 : r;
}

bool ModuleKeys::install(const std::vector<ModuleKey>& keys, const std::function<void(uint32_t)>& announce)
{
    if (!ctl_ || (cleared_ && keys == wanted_))
        return ctl_ != nullptr;
    error_.clear();
    const uint32_t next = epoch_ + 1;
    if (announce)
        announce(next);
    size_t in = 0;  // keys now in the new half: ids id_of(next, 0 .. in-1)
    size_t refused = 0;
    std::string refused_reason;
    std::vector<int32_t> ids(keys.size(), -1);
    for (size_t ki = 0; ki < keys.size(); ki++) {
        const auto& k = keys[ki];
        if (in == kPerEpoch)
            break;
        int r = add(id_of(next, in), k);
        if (r == 0) {
            ids[ki] = static_cast<int32_t>(id_of(next, in));
            in++;
            continue;
        }
        std::string why = explain(r, l7fast_kmodctl_last_error(ctl_));
        if (r == -EMSGSIZE || r == -EOPNOTSUPP || r == -EINVAL || r == -EKEYREJECTED) {
            if (!refused++)
                refused_reason = key_name(k) + ": " + why;
            continue;
        }
        // the table itself failed: the new half goes, the old one stays
        error_ = "cannot install " + key_name(k) + " in l7fast.ko: " + why;
        for (size_t i = 0; i < in; i++)
            del(id_of(next, i));
        if (announce)
            announce(epoch_);
        log::warning(error_, "; the module keeps the previous ", installed_, " keys");
        return false;
    }
    // the new epoch is whole: the previous one goes, or on an instance's
    // first call every other id (what an earlier l7fastd left)
    std::vector<uint32_t> gone;
    if (cleared_) {
        for (size_t i = 0; i < installed_; i++)
            gone.push_back(id_of(epoch_, i));
    } else {
        for (uint32_t id = 0; id < L7FAST_MAX_KEYS; id++)
            if (id / kPerEpoch != (next & 1) || id % kPerEpoch >= in)
                gone.push_back(id);
    }
    for (uint32_t id : gone) {
        if (int r = del(id); r < 0) {
            error_ = "cannot remove key " + std::to_string(id) + " from l7fast.ko: " +
                     explain(r, l7fast_kmodctl_last_error(ctl_));
            log::warning(error_);
            break;
        }
    }
    cleared_ = true;
    epoch_ = next;
    installed_ = in;
    wipe(wanted_);
    wanted_ = keys;
    ids_ = std::move(ids);
    left_out_reason_ = refused ? refused_reason
                       : left_out() ? "more than " + std::to_string(kPerEpoch) + " HMAC keys"
                                    : std::string();
    if (left_out())
        log::warning("l7fast.ko holds ", installed_, " of the policy's ", keys.size(),
                     " JWT HMAC keys; the others are verified in user space only (", left_out_reason_, ")");
    log::info("l7fast.ko: ", installed_, " JWT HMAC key", installed_ == 1 ? "" : "s", " installed (key epoch ",
              epoch_, ")");
    return error_.empty();
}

void ModuleKeys::remove_all()
{
    if (!ctl_ || !installed_)
        return;
    size_t failed = 0;
    for (size_t i = 0; i < installed_; i++)
        if (del(id_of(epoch_, i)) < 0)
            failed++;
    if (failed)
        log::warning("could not remove ", failed, " JWT HMAC keys from l7fast.ko: ",
                     l7fast_kmodctl_last_error(ctl_), "; unloading the module (modprobe -r l7fast) removes them");
    else
        log::info("l7fast.ko: removed ", installed_, " JWT HMAC keys");
    installed_ = 0;
    ids_.clear();
    wipe(wanted_);
}

std::string ModuleKeys::summary() const
{
    if (!ctl_)
        return "none: " + absent_;
    std::string s = std::to_string(installed_) + " JWT HMAC key" + (installed_ == 1 ? "" : "s") +
                    " in l7fast.ko (key epoch " + std::to_string(epoch_) + ")";
    if (left_out())
        s += ", " + std::to_string(left_out()) + " verified in user space only: " + left_out_reason_;
    if (!error_.empty())
        s += "; last change failed: " + error_;
    return s;
}

}  // namespace l7fast::dataplane
