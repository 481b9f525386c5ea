// The socket of the connection a request came on, to notice a client that left while a
// non-streaming request is still generating (a stream notices at its next write).
//
// cpp-httplib 0.11 gives handlers no access to the socket (Request::is_connection_closed came in
// later versions), so the socket is found by its addresses among the process's open sockets
// (/proc/self/fd). The worker thread running the handler owns that socket until the handler
// returns, so the descriptor found cannot be closed and reused while it is watched.
#pragma once

#include <string>

namespace syv::server {

class PeerConnection {
 public:
  // Finds the socket whose local and peer addresses are these (numeric, as httplib gives them).
  // None found (e.g. /proc unavailable): closed() is always false.
  PeerConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                 int remote_port);
  bool found() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection (POLLRDHUP, POLLHUP or POLLERR). A client
  // that only half-closes (shutdown(SHUT_WR)) after its request counts as gone, as in uvicorn.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace syv::server
