#include "proxy/RateLimiter.hpp"

#include <openssl/evp.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include "common/Clock.hpp"
#include "common/KernelHash.hpp"
#include "common/Log.hpp"

namespace l7fast::policy {

namespace {

uint64_t random_seed()
{
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string stored_key(std::string_view key)
{
    if (key.size() <= RateLimiter::kMaxKeyBytes)
        return std::string(key);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(key.data(), key.size(), digest, &n, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("SHA-256 failed");
    // kMaxKeyBytes + 1 bytes: no key kept as is has that length, so a digest
    // never equals one
    std::string out(RateLimiter::kMaxKeyBytes + 1, '\0');
    std::copy(digest, digest + n, out.begin());
    return out;
}

}  // namespace

size_t RateLimiter::SeededHash::operator()(std::string_view s) const
{
    return static_cast<size_t>(kernel::match_hash(seed, s, false));
}

RateLimiter::RateLimiter(const RateLimit& limit, std::optional<dataplane::SharedBucket> shared)
    : RateLimiter(limit.rate, limit.burst, limit.max_keys)
{
    keyed_ = limit.key.has_value();
    if (shared && shared->state) {
        shared_ = std::move(shared);
        __atomic_store_n(shared_->state, __u64{0}, __ATOMIC_SEQ_CST);
    }
}

RateLimiter::RateLimiter(uint32_t rate, uint32_t burst, uint32_t max_keys)
    : rate_(rate), burst_(burst), max_keys_(max_keys ? max_keys : 1), index_(16, SeededHash{random_seed()})
{
}

uint64_t RateLimiter::take(std::optional<std::string_view> key, uint64_t now_ns)
{
    if (!key && shared_) {
        uint64_t wait = 0;
        // unbounded: every lost race is another taker's token (lock-free)
        do {
            L7_BUCKET_TAKE_SHARED(shared_->state, monotonic_ns(), rate_, burst_, 64, wait);
        } while (wait == L7_BUCKET_BUSY);
        return wait;
    }
    if (!key)
        return l7_bucket_take(&keyless_, now_ns, rate_, burst_);
    if (kernel_keys() && key->size() <= L7_RATE_KEY_MAX) {
        l7_rate_key k{};
        std::memcpy(k.word, key->data(), key->size());
        k.len = static_cast<__u32>(key->size());
        std::optional<uint64_t> wait;
        // every lost race is another taker's token (lock-free)
        do {
            wait = shared_->take_key(k, rate_, burst_);
        } while (wait && *wait == L7_BUCKET_BUSY);
        if (wait)
            return *wait;
        // the kernel refused (out of memory): this key's bucket is kept
        // here until it works again
        if (!take_key_failed_++)
            log::warning("a keyed rate limit cannot reach the kernel's table of its keys; keys are counted "
                         "in l7fastd meanwhile");
    }
    const std::string stored = stored_key(*key);
    if (auto it = index_.find(stored); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return l7_bucket_take(&it->second->second, now_ns, rate_, burst_);
    }
    if (index_.size() >= max_keys_) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
    }
    lru_.emplace_front(stored, __u64{0});
    index_.emplace(lru_.front().first, lru_.begin());
    return l7_bucket_take(&lru_.front().second, now_ns, rate_, burst_);
}

}  // namespace l7fast::policy
