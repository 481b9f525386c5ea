#include "server/peer_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace syv::server {

namespace {

// The numeric host and port of `addr`, as httplib formats Request::remote_addr (getnameinfo).
bool numeric_address(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST];
  char p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, p, sizeof p,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = h;
  port = std::atoi(p);
  return true;
}

}  // namespace

PeerConnection::PeerConnection(const std::string& local_addr, int local_port,
                               const std::string& remote_addr, int remote_port) {
  if (remote_port <= 0 || local_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    std::string host;
    int port = 0;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        !numeric_address(addr, len, host, port) || port != local_port || host != local_addr) {
      continue;
    }
    len = sizeof addr;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        !numeric_address(addr, len, host, port) || port != remote_port || host != remote_addr) {
      continue;
    }
    fd_ = static_cast<int>(fd);
    break;
  }
  closedir(dir);
}

bool PeerConnection::closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace syv::server
