// SiteMirror: the receiving end of one `geops site` process's WAN side, made
// when the process starts (topologies with two or more sites): the mirror
// service listening on its port (rpc::MirrorService) and the peers' mirror
// addresses, from --mirror-peers, from the peers file that `geops launch`
// writes once every shard listens (polled in the background), or from the
// topology's base ports. SiteWan builds the sending side over it once the
// shard exists, which for a model brought by the workers is later.
//
// Peers file (JSON): {"mirrors": {"<site>": ["host:port of shard 0", ...]}}.
//
// It also answers the cross-site model questions of a client-defined model:
// CheckPeersModel() asks every peer that has fixed a model whether a
// proposal is the same one (at registration, before this site fixes its
// own), and a peer's heartbeat naming another model after both fixed
// theirs (a race between two sites' first workers) is reported to the
// conflict callback with the table that differs.
//
// Thread-safety: all methods may be called from any thread.
#ifndef GEOPS_SITE_SITE_MIRROR_H_
#define GEOPS_SITE_SITE_MIRROR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/model_spec.h"
#include "common/status.h"
#include "config/topology.h"
#include "thrift/mirror_service.h"

namespace geops::site {

using config::Topology;

struct SiteMirrorArgs {
  int mirror_port = -1;       // -1: base_port + 1000 + shard when base_port > 0, else any free port
  std::string mirror_peers;   // "site=host:port,..." for this shard; overrides the peers file
  std::string peers_file;     // written by geops launch
  std::string run_id;         // the run whose peers file counts (its "run_id"); "": any
  // The model this shard serves or has fixed; nullopt while it has none.
  std::function<std::optional<ModelSpec>()> schema;
  // A peer fixed another model than this shard's: `why` names the table
  // and what differs. Called at most once, from a mirror handler thread.
  std::function<void(const Status& why)> on_conflict;
};

class SiteMirror {
 public:
  // InvalidArgument for bad peers; Unavailable when the port cannot be
  // bound. REQUIRES: topology.multi_site(); `topology` outlives it.
  static Result<std::unique_ptr<SiteMirror>> Start(const Topology& topology, int site, int shard,
                                                   SiteMirrorArgs args);
  ~SiteMirror();

  rpc::MirrorService* service() { return service_.get(); }
  std::string address() const { return service_->address().ToString(); }

  // For a proposed client-defined model, before this site fixes it: asks
  // every peer (each call bounded by the client deadlines) for the model it
  // has fixed. FailedPrecondition naming the peer site, the table and what
  // differs when one has fixed another; OK when all that answered agree or
  // none has fixed one yet (a peer that does not answer is not waited for:
  // the heartbeat check catches it later); Unavailable while a peer's
  // address is not known yet (the peers file is not read yet).
  Status CheckPeersModel(const ModelSpec& proposal) const;

 private:
  SiteMirror() = default;
  void WatchPeersFile(std::string path);
  Status ParsePeers(const nlohmann::json& doc);
  void OnConflict(SiteId peer, uint64_t their_fingerprint);
  // The difference between `ours` and what `peer` fixed, as a
  // FailedPrecondition naming the peer and the table; OK when the same.
  Status CompareWith(SiteId peer, const ModelSpec& ours, const ModelSpec& theirs) const;

  const Topology* topology_ = nullptr;
  int site_ = 0;
  int shard_ = 0;
  SiteMirrorArgs args_;
  std::unique_ptr<rpc::MirrorService> service_;
  std::atomic<bool> conflict_reported_{false};
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

}  // namespace geops::site

#endif  // GEOPS_SITE_SITE_MIRROR_H_
