// Boost.Asio with C++20 coroutines. Boost 1.74's awaitable.hpp uses
// std::exchange without including <utility>, hence this wrapper.
#pragma once

#include <utility>

#include <boost/asio.hpp>

namespace l7fast {
namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
// Boost 1.74's Asio reports boost::system errors, not std ones.
using error_code = boost::system::error_code;
namespace errc = boost::system::errc;
}  // namespace l7fast
