#include "thrift/mirror_channel.h"

#include <algorithm>

namespace geops::rpc {

void MirrorAddressBook::Set(SiteId site, HostPort address) {
  std::lock_guard<std::mutex> lock(mu_);
  addresses_[site] = std::move(address);
}

std::optional<HostPort> MirrorAddressBook::Find(SiteId site) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = addresses_.find(site);
  if (it == addresses_.end()) return std::nullopt;
  return it->second;
}

size_t MirrorAddressBook::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return addresses_.size();
}

MirrorChannel::MirrorChannel(const MirrorAddressBook* book, SiteId peer, MirrorIdentity self,
                             ThriftClientOptions options)
    : book_(book), peer_(peer), self_(self), options_(options) {}

Result<MirrorClient*> MirrorChannel::Client() {
  if (client_ != nullptr) return client_.get();
  std::optional<HostPort> address = book_->Find(peer_);
  if (!address) return UnavailableError("the mirror address of site " + std::to_string(peer_) + " is not known yet");
  GEOPS_ASSIGN_OR_RETURN(client_, MirrorClient::Create(*address, self_, ForMirrorPeer(options_, peer_)));
  return client_.get();
}

void MirrorChannel::Count() {
  if (client_ != nullptr) wire_bytes_.store(client_->bytes_sent(), std::memory_order_relaxed);
}

Result<wan::BatchAck> MirrorChannel::SendBatch(const wan::WanBatch& batch) {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  Result<wan::BatchAck> r = c->PushBatch(batch);
  Count();
  return r;
}

Result<wan::BatchAck> MirrorChannel::RelayBatch(SiteId dest, const wan::WanBatch& batch) {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  // The relaying site waits for dest's answer well inside this call's own
  // deadline, so a late answer is an Unavailable, not a broken connection.
  const int64_t wait_ms = std::clamp<int64_t>(options_.rpc_timeout_ms / 3, 1, kRelayWaitMs);
  Result<wan::BatchAck> r = c->RelayBatch(dest, batch, wait_ms);
  Count();
  return r;
}

Result<wan::OuterStatePage> MirrorChannel::FetchOuterState(uint64_t incarnation, uint64_t snapshot, int32_t page) {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  Result<wan::OuterStatePage> r = c->OuterState(incarnation, snapshot, page);
  Count();
  return r;
}

Status MirrorChannel::BeginBatch(const wan::WanBatch& batch) {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  Status s = c->BeginPushBatch(batch);
  Count();
  return s;
}

Result<wan::BatchAck> MirrorChannel::EndBatch() {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  return c->EndPushBatch();
}

void MirrorChannel::Abandon() {
  if (client_ != nullptr) client_->AbandonPushes();
}

Status MirrorChannel::SendClock(const wan::WanClockReport& report) {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  Status s = c->ReportClock(report);
  Count();
  return s;
}

Status MirrorChannel::SendNotice(const wan::WanNotice& notice) {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  Status s = c->Notice(notice);
  Count();
  return s;
}

Status MirrorChannel::Heartbeat() {
  GEOPS_ASSIGN_OR_RETURN(MirrorClient * c, Client());
  Status s = c->Heartbeat(book_->incarnation()).status();
  Count();
  return s;
}

wan::PeerChannelFactory MirrorChannelFactory(const MirrorAddressBook* book, MirrorIdentity self,
                                             ThriftClientOptions options) {
  return [book, self, options](SiteId peer, wan::Lane) -> std::unique_ptr<wan::PeerChannel> {
    return std::make_unique<MirrorChannel>(book, peer, self, options);
  };
}

}  // namespace geops::rpc
