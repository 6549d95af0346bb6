// The Boost.Asio names infini.parallel and its users need, included once, here. Every other
// unit imports them from this partition instead of including an Asio header: a unit that
// includes Asio and also imports a module that included it makes clang 19 merge the two
// copies of Asio, which cost 20-50 s of compile time per unit.
module;
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
export module infini.parallel:asio;

// infini::parallel::asio: Boost.Asio's names (infini::parallel code writes asio::awaitable).
export namespace infini::parallel::asio {
using boost::asio::any_completion_handler;
using boost::asio::any_io_executor;
using boost::asio::async_initiate;
using boost::asio::async_result;
using boost::asio::awaitable;
using boost::asio::co_spawn;
using boost::asio::detached_t;
using boost::asio::io_context;
using boost::asio::post;
using boost::asio::steady_timer;
using boost::asio::use_awaitable_t;
// Asio's completion-token constants are constexpr variables (internal linkage), which cannot
// be exported by name; these are equal copies.
inline constexpr boost::asio::detached_t detached{};
inline constexpr boost::asio::use_awaitable_t<> use_awaitable{};
namespace experimental::awaitable_operators {
using boost::asio::experimental::awaitable_operators::operator&&;
using boost::asio::experimental::awaitable_operators::operator||;
}  // namespace experimental::awaitable_operators
}  // namespace infini::parallel::asio
