#include "proxy/Deadline.hpp"

namespace l7fast::proxy {

void Deadline::arm(std::chrono::milliseconds d, std::vector<tcp::socket*> socks)
{
    disarm();
    state_ = std::make_shared<State>();
    state_->socks = std::move(socks);
    auto st = state_;
    timer_.expires_after(d);
    timer_.async_wait([st](error_code ec) {
        if (ec || st->disarmed)
            return;
        st->fired = true;
        for (auto* s : st->socks) {
            error_code ig;
            s->cancel(ig);
        }
    });
}

void Deadline::disarm()
{
    if (!state_)
        return;
    state_->disarmed = true;
    timer_.cancel();
}

}  // namespace l7fast::proxy
