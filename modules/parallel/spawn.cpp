// co_spawn from outside the module units: clang 19 fails to instantiate Asio 1.81's co_spawn
// (a lambda with an init-capture inside its entry point) in a module unit, so the module's
// code starts coroutines through this plain translation unit (declared in pipeline_simulator.cpp).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <exception>
#include <functional>
#include <utility>

namespace infini::parallel::detail {

void spawn(boost::asio::io_context& io, boost::asio::awaitable<void> task, std::function<void(std::exception_ptr)> done) {
  boost::asio::co_spawn(io, std::move(task), [done = std::move(done)](std::exception_ptr e) { done(e); });
}

}  // namespace infini::parallel::detail
