#include "engine/comm/tcp_store.h"

#include <arpa/inet.h>
#include <gloo/common/error.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tpsp::comm {

namespace {

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

/// Appends <u32 length in network order><bytes> to a message being built.
void put_blob(std::string& msg, const char* p, std::size_t n) {
  const uint32_t len = htonl(static_cast<uint32_t>(n));
  msg.append(reinterpret_cast<const char*>(&len), sizeof(len));
  msg.append(p, n);
}

/// Sends a whole message with one write (small writes in a row would meet Nagle + delayed ACK).
bool write_msg(int fd, const std::string& msg) {
  return write_all(fd, msg.data(), msg.size());
}

bool read_blob(int fd, std::string* out) {
  uint32_t len = 0;
  if (!read_all(fd, &len, sizeof(len))) return false;
  out->resize(ntohl(len));
  return read_all(fd, out->data(), out->size());
}

}  // namespace

TcpStoreServer::TcpStoreServer(int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0)
    throw std::runtime_error("tcp store: socket() failed: " + std::string(std::strerror(errno)));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    const std::string err = std::strerror(errno);
    ::close(listen_fd_);
    throw std::runtime_error("tcp store: cannot listen on port " + std::to_string(port) + ": " + err);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  accept_thread_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes recv()
  }
  for (auto& t : conn_threads_) t.join();
  for (int fd : conn_fds_) ::close(fd);
}

void TcpStoreServer::accept_loop() {
  while (!stop_) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      ::close(fd);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn_fds_.push_back(fd);
    conn_threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::serve(int fd) {
  for (;;) {
    char op = 0;
    std::string key;
    if (!read_all(fd, &op, 1) || !read_blob(fd, &key)) return;
    if (op == 'S') {
      std::string value;
      if (!read_blob(fd, &value)) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        data_[key] = std::vector<char>(value.begin(), value.end());
      }
      if (!write_all(fd, "K", 1)) return;
    } else if (op == 'G') {
      std::vector<char> value;
      bool found = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = data_.find(key);
        if (it != data_.end()) {
          found = true;
          value = it->second;
        }
      }
      if (!found) {
        if (!write_all(fd, "N", 1)) return;
      } else {
        std::string msg = "Y";
        put_blob(msg, value.data(), value.size());
        if (!write_msg(fd, msg)) return;
      }
    } else {
      return;  // protocol error: drop the connection
    }
  }
}

TcpStore::TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  if (serve) server_ = std::make_unique<TcpStoreServer>(port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error = "no attempt";
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
      last_error = ::gai_strerror(rc);
    } else {
      for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          fd_ = fd;
        } else {
          last_error = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (fd_ < 0) {
    throw gloo::IoException("tcp store: timed out connecting to " + host + ":" + std::to_string(port) + " (" +
                            last_error + ")");
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard<std::mutex> lock(mu_);
  char reply = 0;
  std::string msg = "S";
  put_blob(msg, key.data(), key.size());
  put_blob(msg, data.data(), data.size());
  if (!write_msg(fd_, msg) || !read_all(fd_, &reply, 1) || reply != 'K') {
    throw gloo::IoException("tcp store: set('" + key + "') failed: the store server is gone");
  }
}

bool TcpStore::try_get(const std::string& key, std::vector<char>* value) {
  std::lock_guard<std::mutex> lock(mu_);
  char reply = 0;
  std::string msg = "G";
  put_blob(msg, key.data(), key.size());
  if (!write_msg(fd_, msg) || !read_all(fd_, &reply, 1)) {
    throw gloo::IoException("tcp store: get('" + key + "') failed: the store server is gone");
  }
  if (reply == 'N') return false;
  std::string v;
  if (reply != 'Y' || !read_blob(fd_, &v))
    throw gloo::IoException("tcp store: bad reply to get('" + key + "')");
  if (value) value->assign(v.begin(), v.end());
  return true;
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> value;
  try_get(key, &value);
  return value;
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (const auto& key : keys) {
    while (!try_get(key, nullptr)) {
      if (std::chrono::steady_clock::now() >= deadline)
        throw gloo::IoException("tcp store: timed out after " + std::to_string(timeout.count()) +
                                " ms waiting for key '" + key + "'");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }
}

}  // namespace tpsp::comm
