// geops WAN protocol: one shard <-> the same shard of another site.
//
// Transport and protocol as the LAN service (parameter_server.thrift):
// framed TCP with the per-frame budget reset, binary protocol, every frame
// bounded. A sender keeps two connections per peer: the bulk lane carries
// pushBatch in order, the priority lane carries notice, reportClock and
// heartbeat so that they overtake queued batches (a receiver holds a clock
// report until the batches it covers have landed).
//
// Every request names its origin site and shard; a receiver refuses a shard
// id other than its own, its own site id, and (heartbeat) another model.
// Chunk keys are packed into one i64: (table id << 32) | chunk id.
//
// Incarnations (wan/wan_transport.h): every request carries its sender's
// store incarnation; a receiver that hears a new one from a peer (the peer
// lost its store) resets that peer's streams first and answers Unavailable
// meanwhile; a request from an older incarnation, or one made for an older
// incarnation of the receiver (dest_incarnation), is refused
// (FailedPrecondition) and the sender drops it.

include "parameter_server.thrift"

namespace cpp geops.rpc.gen

// A clock report riding with a batch (pushBatch's `report`): "my shard
// clock is `clock`; you have had every batch through this one". Origin,
// last_seq and incarnations are the batch's. Taken once the batch landed,
// as a reportClock naming this seq would be.
struct RidingReport {
  1: i64 clock,
  2: bool drained,
}

struct PushBatchRequest {
  1: i32 origin,       // sending site
  2: i32 shard_id,     // the receiver's shard index must be the same
  3: i64 seq,          // 1, 2, 3, ... per (origin, destination); applied once each
  4: i64 clock,        // origin shard clock when the batch was cut
  5: binary payload,   // one WAN batch (docs/wan_batch_format.md)
  6: i64 incarnation,       // the sender's store incarnation (0: unknown)
  7: i64 dest_incarnation,  // the receiver's, as the sender knew it (0: unknown)
  // Set when a third site carries the batch for its origin, whose own link
  // to the receiver is out (relayBatch): the relaying site, whose identity
  // the connection must have. Taken only by a receiver that relays too.
  8: optional i32 relayed_by,
  // A tied clock report made in the same round as this batch goes with it
  // instead of as a reportClock of its own (docs/wan_replication.md).
  9: optional RidingReport report,
}

// "Carry my batch on to site `dest`": the caller's own link to dest is out.
// The relaying site sends it over its own link and answers with dest's
// reply, or Unavailable when none came within timeout_ms.
struct RelayBatchRequest {
  1: i32 dest,
  2: PushBatchRequest batch,  // origin: the caller
  3: i64 timeout_ms,
}

struct PushBatchReply {
  1: i64 seq,  // the batch acknowledged: applied now or before, or buffered to apply in order
  // Set when the receiver quarantined the batch instead of applying it (its
  // sum with the replica would not be finite): where and why. The seq is
  // consumed all the same; the sender must not resend it.
  2: optional string quarantined,
}

// Selective barrier: hold local reads of these chunks until batch `seq`
// lands (at most timeout_ms).
struct NoticeRequest {
  1: i32 origin,
  2: i32 shard_id,
  3: i64 seq,
  4: list<i64> chunk_keys,
  5: i64 timeout_ms,
  6: i64 incarnation,
  7: i64 dest_incarnation,
}

// The origin's shard clock; valid once batches through last_seq are applied.
// drained: the origin's workers all finished and last_seq is its final batch.
struct ClockReportRequest {
  1: i32 origin,
  2: i32 shard_id,
  3: i64 clock,
  4: i64 last_seq,
  5: bool drained,
  6: i64 incarnation,
  7: i64 dest_incarnation,
}

struct MirrorHeartbeat {
  1: i32 origin,
  2: i32 shard_id,
  3: i64 model_fingerprint,  // 0 skips the check
  4: i64 incarnation,
  5: i64 boot,               // the sending process's start id (new at every restart); 0: not given
}

struct MirrorHeartbeatReply {
  1: i32 site,
  2: i32 shard_id,
  3: i64 model_fingerprint,
}

// The model this shard serves or has fixed (a client-defined model is fixed
// by the first worker's schema), so that a site about to fix its model can
// compare it with its peers' and name the table that differs.
struct MirrorSchemaRequest {
  1: i32 origin,
  2: i32 shard_id,
}

struct MirrorSchemaReply {
  1: bool has_model,                                  // false: no worker has registered one yet
  2: list<parameter_server.TableSchema> tables,
  3: i64 chunk_bytes,
  4: i64 model_fingerprint,
}

// A site that lost its store asks each peer for its outer-step state
// (avg, diloco) to rejoin; a peer asks the rejoined site for its merged
// state (docs/wan_replication.md, "A diloco site that lost its disk").
// Page 0 takes a snapshot; later pages name it.
struct OuterStateRequest {
  1: i32 origin,
  2: i32 shard_id,
  3: i64 incarnation,  // the asker's
  4: i64 snapshot,     // 0 with page 0
  5: i32 page,
}

struct OuterStateReply {
  1: i64 heard_incarnation,  // the asker's incarnation this site last recorded; 0: never heard of it
  2: bool has_state,
  3: bool joining,           // this site is rejoining itself: its state is not merged yet
  4: i64 snapshot,
  5: i32 page,
  6: i32 pages,
  7: list<binary> keys,      // the page's records (wan/replication/outer_records.h)
  8: list<binary> values,
}

service Mirror {
  PushBatchReply pushBatch(1: PushBatchRequest req) throws (1: parameter_server.GeopsError err),
  PushBatchReply relayBatch(1: RelayBatchRequest req) throws (1: parameter_server.GeopsError err),
  void notice(1: NoticeRequest req) throws (1: parameter_server.GeopsError err),
  void reportClock(1: ClockReportRequest req) throws (1: parameter_server.GeopsError err),
  MirrorHeartbeatReply heartbeat(1: MirrorHeartbeat req) throws (1: parameter_server.GeopsError err),
  MirrorSchemaReply schema(1: MirrorSchemaRequest req) throws (1: parameter_server.GeopsError err),
  OuterStateReply outerState(1: OuterStateRequest req) throws (1: parameter_server.GeopsError err),
}
