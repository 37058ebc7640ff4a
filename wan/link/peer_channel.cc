#include "wan/link/peer_channel.h"

namespace geops::wan {

Status PeerChannel::BeginBatch(const WanBatch& batch) {
  begun_.push_back(&batch);
  return Status::Ok();
}

Result<BatchAck> PeerChannel::EndBatch() {
  if (begun_.empty()) return InternalError("EndBatch with no batch begun");
  const WanBatch* batch = begun_.front();
  begun_.pop_front();
  return SendBatch(*batch);
}

void PeerChannel::Abandon() { begun_.clear(); }

Result<BatchAck> PeerChannel::RelayBatch(SiteId dest, const WanBatch& /*batch*/) {
  return FailedPreconditionError("this channel cannot ask its peer to relay a batch to site " + std::to_string(dest));
}

Result<OuterStatePage> PeerChannel::FetchOuterState(uint64_t /*incarnation*/, uint64_t /*snapshot*/,
                                                    int32_t /*page*/) {
  return UnimplementedError("this channel cannot ask its peer for its outer step state");
}

}  // namespace geops::wan
