// A time limit on socket operations (the slow path's exchanges, health
// checks, upstream connects).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "common/Asio.hpp"

namespace l7fast::proxy {

// Cancels socket operations when a time limit passes. The handler may run
// after its owner is gone, so it only touches shared state.
class Deadline {
public:
    explicit Deadline(asio::io_context& io) : timer_(io) {}
    ~Deadline() { disarm(); }
    void arm(std::chrono::milliseconds d, std::vector<tcp::socket*> socks);
    void disarm();
    bool fired() const { return state_ && state_->fired; }

private:
    struct State {
        bool fired = false, disarmed = false;
        std::vector<tcp::socket*> socks;
    };
    asio::steady_timer timer_;
    std::shared_ptr<State> state_;
};

}  // namespace l7fast::proxy
