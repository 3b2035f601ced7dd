// Is the HTTP client still there? cpp-httplib 0.11 (Debian 12) gives handlers no socket, so the
// connection's descriptor is found once per request by its address 4-tuple, then polled: a peer
// that closed (FIN/RST) cancels its generation within one token.
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace rocky::server {

class ConnectionProbe {
 public:
  // Finds the socket whose local/peer addresses are these (numeric host strings, as httplib gives).
  ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
  // False once the peer has closed its side or the socket errored; true when unknown (no socket found).
  bool alive() const;
  // After this, alive() no longer touches the descriptor (httplib may close and reuse it).
  void release() { fd_.store(-1); }
  bool found() const { return fd_.load() >= 0; }

 private:
  std::atomic<int> fd_{-1};
};

}  // namespace rocky::server
