#include "common/KernelHash.hpp"

#include <cstring>
#include <vector>

#include "l7_http.h"

namespace l7fast::policy::kernel {

uint64_t match_hash(uint64_t seed, std::string_view bytes, bool lower)
{
    return l7_hash_str(seed, bytes.data(), static_cast<__u32>(bytes.size()), lower ? 1 : 0);
}

uint32_t header_name_hash(std::string_view name)
{
    return static_cast<uint32_t>(l7_hash_str(0, name.data(), static_cast<__u32>(name.size()), 1));
}

namespace {

// A parser-sized window: L7_WS_BUF + L7_WINDOW_SLACK addressable bytes, as in
// struct l7_ws, because word loads near the end read into the slack.
class Window {
public:
    Window(std::string_view bytes, uint32_t off, uint32_t len)
        : valid_(bytes.size() <= L7_WS_BUF && len <= L7_MAX_MATCH_STR && off <= bytes.size() &&
                 len <= bytes.size() - off),
          buf_(valid_ ? L7_WS_BUF + L7_WINDOW_SLACK : 0)
    {
        if (!valid_)
            return;
        std::memcpy(buf_.data(), bytes.data(), bytes.size());
        w_.buf = buf_.data();
        w_.len = static_cast<__u32>(bytes.size());
    }
    bool valid() const { return valid_; }
    const l7_window* get() const { return &w_; }

private:
    bool valid_;
    std::vector<__u8> buf_;
    l7_window w_{};
};

}  // namespace

uint64_t window_hash(std::string_view window, uint32_t off, uint32_t len, uint64_t seed, bool lower)
{
    const Window w(window, off, len);
    return w.valid() ? l7_hash_window(w.get(), off, len, seed, lower ? 1 : 0) : 0;
}

bool window_eq(std::string_view window, uint32_t off, uint32_t len, const uint8_t* str, bool lower)
{
    const Window w(window, off, len);
    return w.valid() && l7_window_eq(w.get(), off, len, str, lower ? 1 : 0);
}

}  // namespace l7fast::policy::kernel
