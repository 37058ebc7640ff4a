#include "thrift/connection_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>

#include "common/thread_name.h"

namespace geops::rpc {

using apache::thrift::TConnectionInfo;
using apache::thrift::TProcessor;
using apache::thrift::protocol::TProtocol;
using apache::thrift::transport::TSocket;
using apache::thrift::transport::TTransport;
using apache::thrift::transport::TTransportException;

namespace {

constexpr uint64_t kWakeId = 0;
constexpr int kMaxEvents = 256;
constexpr int kPollMs = 500;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Idle connections cost a descriptor each: allow as many as the hard limit.
void RaiseDescriptorLimit() {
  static const bool raised = [] {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
      lim.rlim_cur = lim.rlim_max;
      if (setrlimit(RLIMIT_NOFILE, &lim) != 0) spdlog::warn("cannot raise the open-file limit: {}", std::strerror(errno));
    }
    return true;
  }();
  (void)raised;
}

}  // namespace

struct ConnectionServer::Connection {
  uint64_t id = 0;
  std::shared_ptr<TSocket> socket;
  WireSocket* wire = nullptr;  // `socket` as geops sees it, when it is one of geops' sockets
  std::shared_ptr<TProtocol> in;
  std::shared_ptr<TProtocol> out;
  std::shared_ptr<TProcessor> processor;
  std::atomic<int64_t> last_active_ms{0};
  bool busy = false;    // GUARDED_BY(mu_): queued or being served
  bool closed = false;  // GUARDED_BY(mu_)
};

ConnectionServer::ConnectionServer(std::shared_ptr<apache::thrift::TProcessorFactory> processors,
                                   std::shared_ptr<ListenSocket> listener,
                                   std::shared_ptr<apache::thrift::transport::TTransportFactory> transports,
                                   std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols,
                                   Limits limits, std::string name, std::string thread_tag)
    : processors_(std::move(processors)),
      listener_(std::move(listener)),
      transports_(std::move(transports)),
      protocols_(std::move(protocols)),
      limits_(limits),
      name_(std::move(name)),
      thread_tag_(std::move(thread_tag)) {
  RaiseDescriptorLimit();
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
}

ConnectionServer::~ConnectionServer() {
  stop();
  if (poller_.joinable()) poller_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  work_cv_.notify_all();
  for (std::thread& t : workers) t.join();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ConnectionServer::serve() {
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    throw TTransportException(TTransportException::UNKNOWN,
                              name_ + ": cannot set up epoll: " + std::string(std::strerror(errno)));
  }
  poller_ = std::thread([this] { PollLoop(); });
  int64_t last_accept_error_ms = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    std::shared_ptr<TTransport> client;
    try {
      client = listener_->accept();
    } catch (const TTransportException& e) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
      }
      // Out of descriptors or memory, or a connection reset before accept:
      // say so (once a second at most) and go on.
      if (NowMs() - last_accept_error_ms > 1000) {
        spdlog::warn("{}: accept failed: {}", name_, e.what());
        last_accept_error_ms = NowMs();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    Accepted(std::move(client));
  }
  if (poller_.joinable()) poller_.join();

  // Idle and queued connections close now; requests in progress finish (the
  // interrupt ended their reads; a handler waiting in the shard ends by its
  // own deadline) and their workers close them.
  std::vector<std::shared_ptr<Connection>> victims;
  std::unique_lock<std::mutex> lock(mu_);
  for (const auto& c : ready_) c->busy = false;
  ready_.clear();
  for (const auto& [id, c] : by_id_) {
    if (!c->busy) victims.push_back(c);
  }
  for (const auto& c : victims) Close(c);
  idle_cv_.wait(lock, [this] { return active_.load() == 0; });
  std::vector<std::shared_ptr<Connection>> rest;
  for (const auto& [id, c] : by_id_) rest.push_back(c);
  for (const auto& c : rest) Close(c);
  std::vector<std::thread> workers;
  workers.swap(workers_);
  lock.unlock();
  victims.clear();
  rest.clear();
  work_cv_.notify_all();
  for (std::thread& t : workers) t.join();
}

void ConnectionServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  listener_->interrupt();          // accept() ends
  listener_->interruptChildren();  // reads in progress end
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)::write(wake_fd_, &one, sizeof(one));
  }
  work_cv_.notify_all();
}

void ConnectionServer::Accepted(std::shared_ptr<TTransport> client) {
  auto socket = std::dynamic_pointer_cast<TSocket>(client);
  if (socket == nullptr) {
    client->close();
    return;
  }
  if (open_.load() >= limits_.max_connections) {
    const int64_t n = refused_.fetch_add(1) + 1;
    if ((n & (n - 1)) == 0) {  // 1, 2, 4, 8, ...: a flood does not flood the log
      spdlog::warn("{}: connection from {} refused: {} connections are open (max_connections); {} refused so far",
                   name_, socket->getPeerAddress(), open_.load(), n);
    }
    socket->close();
    return;
  }
  auto c = std::make_shared<Connection>();
  static std::atomic<uint64_t> next_id{kWakeId + 1};
  c->id = next_id.fetch_add(1);
  c->socket = socket;
  c->wire = dynamic_cast<WireSocket*>(socket.get());
  try {
    c->in = protocols_->getProtocol(transports_->getTransport(client));
    c->out = protocols_->getProtocol(transports_->getTransport(client));
    TConnectionInfo info;
    info.input = c->in;
    info.output = c->out;
    info.transport = client;
    c->processor = processors_->getProcessor(info);
  } catch (const std::exception& e) {
    spdlog::warn("{}: cannot set up a connection: {}", name_, e.what());
    socket->close();
    return;
  }
  c->last_active_ms = NowMs();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    socket->close();
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = c->id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket->getSocketFD(), &ev) != 0) {
    spdlog::warn("{}: cannot watch a connection: {}", name_, std::strerror(errno));
    socket->close();
    return;
  }
  by_id_[c->id] = c;
  open_.fetch_add(1);
}

void ConnectionServer::PollLoop() {
  NameThisThread(thread_tag_ + "-poll");
  epoll_event events[kMaxEvents];
  int64_t last_sweep_ms = NowMs();
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events, kMaxEvents, kPollMs);
    std::vector<std::shared_ptr<Connection>> closed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kWakeId) continue;
        auto it = by_id_.find(events[i].data.u64);
        if (it == by_id_.end() || it->second->busy || it->second->closed) continue;
        it->second->busy = true;
        ready_.push_back(it->second);
        // Every queued connection needs a thread of its own: one waiting
        // now, or a new one (threads woken but not yet running still count
        // as waiting, and each takes one connection).
        if (static_cast<int64_t>(ready_.size()) > idle_workers_ &&
            static_cast<int64_t>(workers_.size()) < limits_.max_active_requests) {
          workers_.emplace_back([this] { WorkerLoop(); });
        }
        work_cv_.notify_one();
      }
      const int64_t now = NowMs();
      if (limits_.idle_timeout_ms > 0 && now - last_sweep_ms >= 1000) {
        last_sweep_ms = now;
        for (auto& [id, c] : by_id_) {
          if (!c->busy && now - c->last_active_ms.load() > limits_.idle_timeout_ms) closed.push_back(c);
        }
        for (const auto& c : closed) Close(c);
      }
    }
    // The last references (and the handlers) go outside the lock.
    closed.clear();
  }
}

void ConnectionServer::WorkerLoop() {
  NameThisThread(thread_tag_ + "-work");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_workers_;
    work_cv_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
    --idle_workers_;
    if (ready_.empty()) return;  // stopping
    std::shared_ptr<Connection> c = std::move(ready_.front());
    ready_.pop_front();
    active_.fetch_add(1);
    lock.unlock();
    const bool keep = Handle(*c);
    lock.lock();
    active_.fetch_sub(1);
    c->busy = false;
    if (!keep || stopping_) {
      Close(c);
    } else {
      Rearm(c);
    }
    idle_cv_.notify_all();
    lock.unlock();
    c.reset();  // the handler may be released here, outside the lock
    lock.lock();
  }
}

bool ConnectionServer::Handle(Connection& c) {
  for (;;) {
    try {
      if (!c.processor->process(c.in, c.out, nullptr)) return false;
    } catch (const TTransportException& e) {
      // END_OF_FILE: the peer closed; INTERRUPTED: stop; TIMED_OUT and
      // CORRUPTED_DATA: the frame deadline or size (logged by the transport).
      if (e.getType() != TTransportException::END_OF_FILE && e.getType() != TTransportException::INTERRUPTED &&
          e.getType() != TTransportException::TIMED_OUT && e.getType() != TTransportException::CORRUPTED_DATA) {
        spdlog::debug("{}: connection from {} dropped: {}", name_, c.socket->getPeerAddress(), e.what());
      }
      return false;
    } catch (const std::exception& e) {
      spdlog::warn("{}: connection from {} dropped: {}", name_, c.socket->getPeerAddress(), e.what());
      return false;
    }
    c.last_active_ms = NowMs();
    // TLS may already hold the next request's records: epoll would not say so.
    if (c.wire == nullptr || !c.wire->HasBufferedInput()) return true;
  }
}

void ConnectionServer::Rearm(const std::shared_ptr<Connection>& c) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = c->id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->socket->getSocketFD(), &ev) != 0) Close(c);
}

void ConnectionServer::Close(const std::shared_ptr<Connection>& c) {
  if (c->closed) return;
  c->closed = true;
  by_id_.erase(c->id);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->socket->getSocketFD(), nullptr);
  open_.fetch_sub(1);
  try {
    c->socket->close();
  } catch (const std::exception& e) {
    spdlog::debug("{}: closing a connection: {}", name_, e.what());
  }
}

}  // namespace geops::rpc
