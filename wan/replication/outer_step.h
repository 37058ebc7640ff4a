// OuterStep: the outer optimiser of the `diloco` and `avg` modes for one
// shard (docs/wan_replication.md, "diloco").
//
// Every site trains on from the synchronised model theta and, every H
// clocks, contributes its progress since its last contribution: A_s, the
// sum of its local updates (quantised, with the quantisation error kept
// for its next contribution). Contributions are numbered 1, 2, 3, ... per
// site (a site's n-th contribution is outer step n); a site's last one is
// marked final, and it takes no part in later steps. Once every site has
// given step n (or ended before it), the step is applied, identically at
// every site:
//
//   Delta = -(sum over sites, in site order, of A_s) / N  (N: all sites)
//   m     = mu * m + Delta
//   theta = theta - lr * (Delta + mu * m)     (Nesterov; plain momentum: lr * m)
//
// computed in double per element and stored as float (theta, m). A site
// that ended contributes nothing to later steps (N stays the number of
// sites).
//
// With the same inputs in the same order every site computes bit-identical
// theta and m. lr = 1, mu = 0 is the average of the sites' models (`avg`);
// lr = N, mu = 0 their sum (every update counted once, the counter check);
// lr = 0.7, mu = 0.9, Nesterov is DiLoCo's.
//
// Thread-compatible: the Replicator calls it under its own mutex.
#ifndef GEOPS_WAN_REPLICATION_OUTER_STEP_H_
#define GEOPS_WAN_REPLICATION_OUTER_STEP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "wan/codec/sparse_update.h"

namespace geops::wan {

struct OuterOptions {
  double lr = 0.7;
  double momentum = 0.9;
  bool nesterov = true;
  // The last step (every site has ended) uses lr 1 and no momentum: the
  // final model is the average of the sites' final models.
  bool average_last = true;
  // Streaming: the chunks, in key order, form `fragments` fragments
  // (chunk i belongs to fragment i mod fragments). Step n updates theta and
  // m of fragment (n - 1) mod fragments only, and of any chunk a
  // contribution to it carries (a site's final contribution carries all of
  // its progress); the other chunks keep theta and m. The last step (every
  // site ended) updates every chunk. 1: every step updates every chunk.
  int64_t fragments = 1;
};

// The last update batch of one worker that a contribution holds: its clock
// and part (WorkerRecord); clock -1: none.
struct CoveredBatch {
  Clock clock = -1;
  int32_t part = -1;
  bool operator==(const CoveredBatch&) const = default;
};

// Where a contribution leaves its site's workers: `cut` is the shard clock
// it was cut at, and covered[w] the last batch of worker w whose update it
// holds. A site that lost its store resumes its workers after the covered
// batches of its last contribution that a peer holds
// (docs/wan_replication.md, "A diloco site that lost its disk").
struct ContributionMark {
  Clock cut = -1;  // -1: not known (a contribution that came without one)
  std::vector<CoveredBatch> covered;
  bool known() const { return cut >= 0; }
  bool operator==(const ContributionMark&) const = default;
};

class OuterStep {
 public:
  // `sites`: every site of the run (this one included), any order.
  OuterStep(std::vector<SiteId> sites, OuterOptions options);

  // Sets theta of `key` to `values` (the model's initial values) before the
  // first step; m starts at 0. Chunks never set are not part of the steps.
  void InitChunk(ChunkKey key, std::span<const float> values);
  bool HasChunk(ChunkKey key) const { return chunks_.count(key) > 0; }

  // Site `site`'s contribution to step `step`. InvalidArgument for a site
  // not in the run, a step already applied or already given by that site, a
  // step after that site's final one, a chunk without theta or of another
  // size, or an index out of range. Nothing changes on error.
  // `mark`: where the contribution leaves its site's workers (kept with
  // it, and as the site's last mark once it is the site's last given).
  Status Add(int64_t step, SiteId site, std::span<const SparseChunkUpdate> chunks, bool final,
             ContributionMark mark = {});

  // The last step `site` gave (0: none).
  int64_t LastGiven(SiteId site) const {
    auto g = given_.find(site);
    return g == given_.end() ? 0 : g->second;
  }
  // The next step to apply (steps 1 .. next_step() - 1 are applied).
  int64_t next_step() const { return next_; }
  // Every site has given next_step(), or ended before it.
  bool Ready() const;
  // No site takes part in next_step() or later: every site has ended.
  bool Finished() const;
  // Some step has a contribution that is not applied yet.
  bool Outstanding() const { return !pending_.empty(); }
  // Applies next_step(). `visit(key, theta)` runs for every chunk with its
  // new theta. FailedPrecondition when not Ready().
  Status ApplyNext(const std::function<void(ChunkKey, std::span<const float>)>& visit);

  // Whether step `step` belongs to the fragment of `key` (always with one
  // fragment; false for a chunk without theta).
  bool Covers(int64_t step, ChunkKey key) const;

  // theta of `key` (empty for a chunk without one).
  std::span<const float> Theta(ChunkKey key) const;
  std::span<const float> Momentum(ChunkKey key) const;
  // A 64-bit digest (FNV-1a) of every theta, in chunk order, after each
  // step applied: equal at two sites exactly when their synchronised models
  // were bit-identical after that step.
  const std::vector<uint64_t>& digests() const { return digests_; }

  // The whole state, for the shard's store (outer_records.h): what Export
  // reads, Import sets again after a restart.
  struct State {
    int64_t next_step = 1;
    std::map<SiteId, int64_t> given;       // last step each site gave
    std::map<SiteId, int64_t> final_step;  // a site's final step, once given
    std::vector<uint64_t> digests;
    std::map<ChunkKey, std::vector<float>> theta;
    std::map<ChunkKey, std::vector<float>> momentum;
    // step -> site -> its contribution, for the steps not applied yet
    std::map<int64_t, std::map<SiteId, std::vector<SparseChunkUpdate>>> pending;
    // step -> site -> the mark of that contribution (those that have one)
    std::map<int64_t, std::map<SiteId, ContributionMark>> pending_marks;
    // site -> the mark of its last given contribution (those that have one)
    std::map<SiteId, ContributionMark> last_marks;
  };
  // Replaces the whole state by `state`. DataLoss naming the problem (and
  // nothing changes) for a site not in the run, a chunk this step did not
  // InitChunk or of another size, theta or momentum missing for a chunk, a
  // non-finite value, a step given that is not below next_step where no
  // contribution waits for it, or a contribution that Add would refuse.
  Status Import(State state);
  // A copy of the whole state (what Import takes).
  State Export() const;

  // What Merge changed.
  struct MergeResult {
    int64_t skipped_from = 0;  // steps skipped_from .. skipped_to were taken applied
    int64_t skipped_to = -1;   // (empty range: none; theta and m then stay)
    std::vector<std::pair<int64_t, SiteId>> added;    // contributions taken, in step order
    std::vector<std::pair<int64_t, SiteId>> dropped;  // own ones whose step came applied
  };
  // Takes in another replica's state of the same run (a peer's, after a
  // site lost its store; docs/wan_replication.md, "A diloco site that lost
  // its disk"). Both hold prefixes of one sequence of steps and of each
  // site's contributions, so the merge is their union:
  //   - if `other` applied more steps, its theta, m and digests replace
  //     these (the contributions held here for those steps go);
  //   - every contribution `other` holds for a step not applied here, and
  //     not held here, is added (in step order per site);
  //   - each site's last step given and final step are the larger.
  // DataLoss naming the problem, and nothing changes, when `other` fails
  // Import's checks, its digests and these differ at some step (the
  // synchronised models diverged), or it holds another contribution of the
  // same site to the same step than this one does.
  Result<MergeResult> Merge(const State& other);
  // The contribution of `site` to `step` while that step is not applied
  // (nullptr otherwise).
  const std::vector<SparseChunkUpdate>* Contribution(int64_t step, SiteId site) const;
  // The mark of a contribution not applied yet, or of a site's last given
  // contribution; nullptr when none is known.
  const ContributionMark* MarkOf(int64_t step, SiteId site) const;
  const ContributionMark* LastMark(SiteId site) const;
  const std::map<SiteId, int64_t>& given() const { return given_; }
  const std::map<SiteId, int64_t>& final_steps() const { return final_step_; }
  // The chunks with a theta, in order.
  std::vector<ChunkKey> Chunks() const;

 private:
  struct Chunk {
    std::vector<float> theta;
    std::vector<float> m;
    int64_t ordinal = 0;  // its place in key order; its fragment is ordinal mod fragments
  };
  Status CheckChunks(const std::string& what, std::span<const SparseChunkUpdate> chunks) const;
  // Import's checks of a whole state against this step's chunks and sites.
  Status CheckState(const State& state) const;
  // Sites that take part in `step`.
  bool TakesPart(SiteId site, int64_t step) const;

  const std::vector<SiteId> sites_;  // sorted
  const OuterOptions options_;
  std::map<ChunkKey, Chunk> chunks_;
  // step -> site -> its contribution
  std::map<int64_t, std::map<SiteId, std::vector<SparseChunkUpdate>>> pending_;
  std::map<SiteId, int64_t> given_;      // last step each site gave
  std::map<SiteId, int64_t> final_step_; // a site's final step, once given
  std::map<int64_t, std::map<SiteId, ContributionMark>> pending_marks_;
  std::map<SiteId, ContributionMark> last_marks_;
  int64_t next_ = 1;
  std::vector<uint64_t> digests_;
  std::vector<double> sum_;              // scratch
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_OUTER_STEP_H_
