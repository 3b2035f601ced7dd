// `rocky serve`'s lifecycle: run_server() binds, loads, serves and stops. The App (app.hpp, its
// request handlers also in app_requests.cpp) owns the model, tokenizer, template, prefix cache and
// scheduler; its handlers parse (request.cpp), run, and answer with responses.cpp's shapes
// (stream.cpp for SSE, metrics.cpp for /metrics).
#include "server/server.hpp"

#include <sys/socket.h>

#include "server/app.hpp"

namespace rocky::server {
using detail::App;
using detail::Clock;

int32_t slot_ctx(const ServerOptions& o, int32_t n_ctx) {
  return o.n_parallel_given && !o.kv_unified ? n_ctx / o.n_parallel : n_ctx;
}

int run_server(const ServerOptions& given) {
  ServerOptions o = given;
  if (!o.n_parallel_given) o.n_parallel = k_auto_parallel;
  // SIGINT/SIGTERM are taken by sigtimedwait below, in this thread only: block them before any
  // thread starts (threads inherit the mask). SIGPIPE (a client gone mid-write) is ignored.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  App app(o);
  httplib::Server svr;
  const size_t n_threads = static_cast<size_t>(o.n_parallel) + o.queue + 8;
  svr.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  svr.set_payload_max_length(o.max_body);
  svr.set_read_timeout(o.timeout_s, 0);
  svr.set_write_timeout(o.timeout_s, 0);
  svr.set_tcp_nodelay(true);
  // SO_REUSEADDR only (a restart binds at once past TIME_WAIT): cpp-httplib's default adds
  // SO_REUSEPORT, with which a second server on a port in use starts and takes half its connections
  // instead of failing (llama-server fails to bind).
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
  });
  app.routes(svr);
  if (o.verbose)
    svr.set_logger([t0 = Clock::now()](const httplib::Request& req, const httplib::Response& res) {
      fmt::print(stderr, "rocky: {:.3f} {} {} {} {} → {} ({} bytes)\n",
                 std::chrono::duration<double>(Clock::now() - t0).count(), req.remote_addr, req.method, req.path,
                 req.body.size(), res.status, res.body.size());
    });
  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on {} (any port)", o.host);
  } else if (!svr.bind_to_port(o.host, port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine?)", o.host, port);
  }
  std::atomic<bool> http_done{false};
  std::thread http([&] {
    svr.listen_after_bind();
    http_done = true;
  });
  // An IPv6 literal goes in brackets in a URL (RFC 3986 §3.2.2): http://[::1]:8080.
  const std::string url_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  fmt::print(stderr, "rocky: listening on http://{}:{}\n", url_host, port);

  std::atomic<bool> loaded{false}, load_failed{false};
  std::string load_error;
  std::thread loader([&] {
    try {
      app.load();
      fmt::print(stderr, "rocky: ready: http://{}:{}/v1 (model '{}')\n", url_host, port,
                 o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias);
      loaded = true;
    } catch (const std::exception& e) {
      load_error = e.what();
      load_failed = true;
    }
  });

  int sig = 0;
  const timespec tick{0, 100'000'000};
  while (!load_failed) {
    sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) break;
    sig = 0;
  }
  loader.join();
  const auto t_stop = Clock::now();
  if (sig == SIGTERM && o.shutdown_drain_s > 0 && !load_failed) {
    // Drain: the node stays fully in service except that /health fails, so the balancer's next
    // checks take it out of rotation without a request lost; what still arrives is served.
    fmt::print(stderr, "rocky: SIGTERM received: draining for {} s (grace {} s)\n", o.shutdown_drain_s,
               o.shutdown_grace_s);
    app.begin_draining();
    const auto drain = std::chrono::duration<double>(std::min(o.shutdown_drain_s, o.shutdown_grace_s));
    while (Clock::now() - t_stop < drain)
      if (sigtimedwait(&sigs, nullptr, &tick) > 0) break;  // a second signal ends the drain
  } else if (sig) {
    fmt::print(stderr, "rocky: {} received: stopping (grace {} s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               o.shutdown_grace_s);
  }
  app.begin_shutdown();
  svr.stop();
  // In-flight requests finish within the grace; then what is left is cancelled (each stops within
  // one token). A second signal cancels at once.
  bool cancelled = false;
  const auto grace = std::chrono::duration<double>(o.shutdown_grace_s);
  while (!http_done) {
    const bool again = sigtimedwait(&sigs, nullptr, &tick) > 0;
    if (!cancelled && (again || Clock::now() - t_stop > grace)) {
      if (app.in_flight() > 0) fmt::print(stderr, "rocky: cancelling {} request(s)\n", app.in_flight());
      app.cancel_all();
      cancelled = true;
    }
    if (cancelled && Clock::now() - t_stop > grace + std::chrono::seconds(10)) {
      fmt::print(stderr, "rocky: connections still open after the grace; exiting\n");
      if (load_failed) fmt::print(stderr, "rocky: {}\n", load_error);  // the reason it stopped
      std::fflush(stderr);
      std::_Exit(load_failed ? 1 : 0);
    }
  }
  http.join();
  app.drop_scheduler();
  app.flush_cache();
  if (load_failed) fail("{}", load_error);
  fmt::print(stderr, "rocky: stopped\n");
  return 0;
}

}  // namespace rocky::server
