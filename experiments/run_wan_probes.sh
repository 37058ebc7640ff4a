#!/usr/bin/env bash
# Single-setting probes beside the WAN comparison.
#
# run_wan_comparison.sh measures the modes; these probes ask why: where asp
# loses clocks against the LAN run on the harsh scenario (the default set),
# and how DiLoCo's bytes and accuracy move with H (diloco-h*). Each probe is
# the committed topology of one mode and scenario
# (experiments/results/wan/<scenario>/topologies/) with one or two settings
# changed, launched alone, one after the other. It records, per probe,
# the accuracy at every evaluation (every 50 clocks), the clock and time of
# the first one at or above the target, the final accuracy at the lowest
# site, the WAN bytes and how often a worker read from its shard instead of
# its SSP cache.
#
# Writes experiments/results/wan/probes/: TABLE.md (the table, command,
# date, machine; TABLE defaults to README) and topologies/ (each probe's
# topology). The launch folders go to a temporary directory and are
# removed.
#
# The harsh scenario's settings changed on 2026-11-27 (the learning rate
# decaying to 1%, asp's threshold following it, two batches in flight, no
# selective barrier; later a 1 s peer lease). The probes of the rounds
# before a change first take the committed harsh topologies back to the
# earlier settings, so that they still make the topologies their tables
# ran (topologies/).
#
# Usage: bash experiments/run_wan_probes.sh [probe ...]
#   (default: the first round of harsh-asp probes, README.md's table)
# Environment: GEOPS (default build/cli/geops), TIMEOUT (seconds per run,
#   default 600), TABLE (default README), TITLE (the table's heading),
#   DRY_RUN=1 (write the topologies, launch nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-600}
src=experiments/results/wan
results=experiments/results/wan/probes
table=$results/${TABLE:-README}.md
topos=$results/topologies
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

# probe -> base topology (scenario/run) and the sed expressions that make it.
declare -A base edits what
add() {
  local e=$3
  [[ $2 == harsh/* && -n $before ]] && e="$before${e:+;$e}"
  [[ $2 == harsh/* ]] && e="$untie${e:+;$e}"
  base[$1]=$2; edits[$1]=$e; what[$1]=$4; order+=("$1")
}
# Adds the probe asp-$1 over the harsh static links and asp-varying-$1
# over the varying ones, both with the edits $2 (after the seed's); $3
# says what the setting is.
add_both() {
  add "asp-$1$sfx" harsh/asp "$se;$2" "asp, $3$sw"
  add "asp-varying-$1$sfx" harsh/asp-varying "$se;$2" "asp on the varying links (outages), $3$sw"
}
# The harsh scenario ties asp's clock reports since 2026-11-28 (round
# seventeen), and since round twenty-two counts what waits over the last
# 400 clocks with 4 batches in flight; every probe starts untied, with 2
# in flight, as they all did before, and the probes of those settings set
# them again.
untie='/^tie_reports = /d;/^ *# it landed, so the drift bound also caps/d;/^ *# it has of this site get: as fast, and closer/d;/^ *# the varying links (probes\/README.md, rounds 13 to 16)/d'
untie="$untie;/^# Over the training.s last 400 clocks a report also waits/,/^tie_backlog_last_clocks = /d"
untie="$untie;s/^max_inflight_batches = 4      # four batches/max_inflight_batches = 2      # two batches/"
# The harsh peer lease before round four (the default 30 s), for the
# probes of rounds one to four.
lease30='/^peer_lease_ms = /d'
# The harsh settings before 2026-11-27, for the probes of rounds one and two.
before="s/^final_learning_rate = .*/final_learning_rate = 0.005/;/^threshold_follows_lr = /d;s/^max_inflight_batches = .*/max_inflight_batches = 1/;/^selective_barrier = /d;$lease30"
# The default scenario's settings before 2026-11-27 (the rate decaying to
# 10%, a fixed cut-off, one batch in flight), for its probes of before.
dbefore='s/^final_learning_rate = .*/final_learning_rate = 0.005/;/^threshold_follows_lr = /d;s/^max_inflight_batches = .*/max_inflight_batches = 1/'
order=()
fp16='s/^codec = .*/codec = "fp16"/'
t01='s/^threshold = .*/threshold = 0.01/;s/^threshold_floor = .*/threshold_floor = 0.01/'
c200='s/^clocks = .*/clocks = 200/'
add lan harsh/lan "" "LAN baseline: 1 site x 5 workers, SSP s 2"
add asp harsh/asp "" "asp as committed: int4, threshold 0.05, DS 8 + allowance, SSP s 2"
add asp-fp16 harsh/asp "$fp16" "asp with fp16 values instead of int4"
add asp-fp16-t01 harsh/asp "$fp16;$t01" "asp, fp16, threshold 0.01 (5x lower)"
add asp-s0 harsh/asp 's/^staleness = .*/staleness = 0/' "asp, SSP s 0 (a worker reads its shard every clock)"
add nolinks-ds2 harsh/asp-nolinks "$fp16;$t01;s/^staleness_ds = .*/staleness_ds = 2/;s/^\[wan\]/[wan]\nmax_drift_allowance = 0/" \
  "asp, every link 1000 Mbit/s 1 ms, fp16, threshold 0.01, DS 2, no allowance"
add lan-200 harsh/lan "$c200" "LAN, 200 clocks, SSP s 2"
add lan-200-s0 harsh/lan "$c200;s/^staleness = .*/staleness = 0/" "LAN, 200 clocks, SSP s 0"
add bsp-200 harsh/asp-nolinks "$c200;s/^mode = .*/mode = \"bsp\"/;s/^codec = .*/codec = \"fp32\"/" \
  "bsp, links 1000 Mbit/s 1 ms, 200 clocks, SSP s 2"
add bsp-200-s0 harsh/asp-nolinks "$c200;s/^mode = .*/mode = \"bsp\"/;s/^codec = .*/codec = \"fp32\"/;s/^staleness = .*/staleness = 0/" \
  "bsp, links 1000 Mbit/s 1 ms, 200 clocks, SSP s 0"
default_probes=("${order[@]}")
# Round two (lr.md, follow.md): asked for by name, not in the default set.
add nolinks-t0 harsh/asp-nolinks "s/^codec = .*/codec = \"fp32\"/;s/^threshold = .*/threshold = 0/;s/^threshold_floor = .*/threshold_floor = 0/;s/^staleness = .*/staleness = 0/;s/^staleness_ds = .*/staleness_ds = 2/;s/^\[wan\]/[wan]\nmax_drift_allowance = 0/" \
  "asp, every link 1000 Mbit/s 1 ms, fp32, threshold 0 (every change ships), SSP s 0, DS 2, no allowance"
for lr in 0.1 0.07 0.035; do
  lre="s/^learning_rate = .*/learning_rate = $lr/"
  add "asp-lr$lr" harsh/asp "$lre" "asp as committed, learning rate $lr (0.05 elsewhere)"
  add "lan-lr$lr" harsh/lan "$lre" "LAN baseline, learning rate $lr (0.05 elsewhere)"
done
for hold in 10 25 50; do
  add "asp-hold$hold" harsh/asp "s/^\\[wan\\]/[wan]\\nmax_hold_clocks = $hold/" \
    "asp, a chunk that held unshipped updates for $hold ticks ships whole"
done
follow='s/^threshold_floor = .*/&\nthreshold_follows_lr = true/'
add asp-follow harsh/asp "$follow" "asp, the threshold decays like the learning rate (0.05 to 0.005)"
inflight() { echo "s/^max_inflight_batches = .*/max_inflight_batches = $1/"; }
for w in 2 4; do
  add "asp-inflight$w" harsh/asp "$(inflight $w)" "asp, $w batches in flight per link (1 elsewhere)"
  add "asp-follow-inflight$w" harsh/asp "$follow;$(inflight $w)" \
    "asp, threshold decaying like the learning rate, $w batches in flight per link"
done
for seed in 2 3; do
  se="s/^seed = .*/seed = $seed/"
  add "lan-seed$seed" harsh/lan "$se" "LAN baseline, seed $seed (initial values and data order; 1 elsewhere)"
  add "asp-seed$seed" harsh/asp "$se" "asp as committed, seed $seed (initial values and data order; 1 elsewhere)"
  add "asp-follow-seed$seed" harsh/asp "$se;$follow" "asp, threshold decaying like the learning rate, seed $seed"
  add "asp-follow-inflight2-seed$seed" harsh/asp "$se;$follow;$(inflight 2)" \
    "asp, threshold decaying like the learning rate, 2 batches in flight per link, seed $seed"
done
# Round two (settle.md): the threshold falls to 0 over the last clocks, so
# that held-back updates leave while clocks remain to train against them.
settle() { echo "s/^\\[wan\\]/[wan]\\nthreshold_settle_clocks = $1/"; }
for r in 50 100 200; do
  add "asp-follow-inflight2-settle$r" harsh/asp "$follow;$(inflight 2);$(settle $r)" \
    "asp, threshold decaying like the learning rate and to 0 over the last $r clocks, 2 batches in flight per link"
  add "asp-settle$r" harsh/asp "$(settle $r)" "asp as committed, threshold falling to 0 over the last $r clocks"
  for seed in 2 3; do
    add "asp-follow-inflight2-settle$r-seed$seed" harsh/asp "s/^seed = .*/seed = $seed/;$follow;$(inflight 2);$(settle $r)" \
      "asp, threshold decaying like the learning rate and to 0 over the last $r clocks, 2 batches in flight per link, seed $seed"
    add "asp-settle$r-seed$seed" harsh/asp "s/^seed = .*/seed = $seed/;$(settle $r)" \
      "asp as committed, threshold falling to 0 over the last $r clocks, seed $seed"
  done
done
# seeded N: the seed's edit (se), name suffix (sfx, none for seed 1) and
# description suffix (sw).
seeded() {
  se="s/^seed = .*/seed = $1/"
  sfx=$([ "$1" = 1 ] || echo "-seed$1")
  sw=$([ "$1" = 1 ] || echo ", seed $1")
}
# Round two (endlr.md): the learning rate decaying to 1% of its initial
# value (0.0005) instead of 10% (0.005), the LAN and asp alike, and asp
# without the selective barrier.
endlr='s/^final_learning_rate = .*/final_learning_rate = 0.0005/'
nobarrier='s/^\[wan\]/[wan]\nselective_barrier = false/'
for seed in 1 2 3; do
  seeded $seed
  add "lan-endlr$sfx" harsh/lan "$se;$endlr" "LAN baseline, learning rate decaying to 0.0005$sw"
  add "asp-endlr$sfx" harsh/asp "$se;$endlr" "asp as committed, learning rate decaying to 0.0005$sw"
  add "asp-follow-inflight2-endlr$sfx" harsh/asp "$se;$endlr;$follow;$(inflight 2)" \
    "asp, threshold decaying like the learning rate (to 0.0005), 2 batches in flight per link$sw"
  add "asp-follow-inflight2-nobarrier-endlr$sfx" harsh/asp "$se;$endlr;$follow;$(inflight 2);$nobarrier" \
    "asp, threshold decaying like the learning rate (to 0.0005), 2 batches in flight per link, no selective barrier$sw"
done
for seed in 1 2 3; do
  seeded $seed
  add "asp-varying-endlr$sfx" harsh/asp-varying "$se;$endlr" \
    "asp as committed, links varying like Verizon-EVDO-driving (outages), learning rate decaying to 0.0005$sw"
  add "asp-varying-follow-inflight2-nobarrier-endlr$sfx" harsh/asp-varying "$se;$endlr;$follow;$(inflight 2);$nobarrier" \
    "asp, links varying like Verizon-EVDO-driving (outages), threshold decaying like the learning rate (to 0.0005), 2 batches in flight per link, no selective barrier$sw"
done
# DiLoCo's period (diloco_h.md), at the settings of its day.
for scenario in default harsh; do
  for h in 25 100 200 500; do
    add "diloco-$scenario-h$h" "$scenario/diloco" "$([ "$scenario" = harsh ] || echo "$dbefore;")s/^averaging_period = .*/averaging_period = $h/" \
      "$scenario: diloco, H $h, 4-bit, outer lr 0.7, Nesterov 0.9"
  done
done
# Round three (bound.md, threshold_new.md, inflight_new.md): from the harsh
# settings of 2026-11-27 (the committed topologies since), one setting
# changed: a tighter drift bound, SSP s 0, a lower cut-off, more in flight.
before=$lease30
for seed in 1 2 3; do
  seeded $seed
  add "lan-new$sfx" harsh/lan "$se" "LAN baseline (rate decaying to 0.0005)$sw"
  add "asp-new$sfx" harsh/asp "$se" "asp with the harsh settings of 2026-11-27: DS 8 + allowance, SSP s 2$sw"
  for ds in 2 4; do
    add "asp-new-ds$ds$sfx" harsh/asp "$se;s/^staleness_ds = .*/staleness_ds = $ds/" \
      "asp with the harsh settings of 2026-11-27, DS $ds + allowance$sw"
  done
  add "asp-new-s0$sfx" harsh/asp "$se;s/^staleness = .*/staleness = 0/" \
    "asp with the harsh settings of 2026-11-27, SSP s 0 (the worker reads every clock)$sw"
  # threshold_new.md: a lower cut-off.
  for t in 0.03 0.02; do
    add "asp-new-t$t$sfx" harsh/asp "$se;s/^threshold = .*/threshold = $t/;s/^threshold_floor = .*/threshold_floor = $t/" \
      "asp with the harsh settings of 2026-11-27, threshold $t (0.05 elsewhere)$sw"
  done
  # inflight_new.md: more batches in flight.
  for w in 3 4; do
    add "asp-new-inflight$w$sfx" harsh/asp "$se;$(inflight $w)" \
      "asp with the harsh settings of 2026-11-27, $w batches in flight per link (2 elsewhere)$sw"
  done
done
# Round three (diloco_h_new.md): DiLoCo's period at the harsh rate of
# 2026-11-27 (decaying to 0.0005).
for h in 10 25 100 200; do
  add "diloco-harsh-new-h$h" harsh/diloco "s/^averaging_period = .*/averaging_period = $h/" \
    "harsh (rate decaying to 0.0005): diloco, H $h, 4-bit, outer lr 0.7, Nesterov 0.9"
done
# Round four (lease.md, lease500.md): since 2026-11-27 heartbeats no
# longer cross an emulated outage, so a peer behind one falls silent and,
# once its lease runs out, leaves the mirror clock of the site it cannot
# reach; a shorter lease than the default 30 s lets that site go on
# instead of waiting the outage out. The varying links and the static
# ones, three seeds.
lease() { echo "s/^\\[wan\\]/[wan]\\npeer_lease_ms = $1/"; }
for seed in 1 2 3; do
  seeded $seed
  add "asp-varying-new$sfx" harsh/asp-varying "$se" \
    "asp on the varying links (outages), harsh settings of 2026-11-27, peer lease 30 s$sw"
  for l in 500 1000 2000; do
    add "asp-varying-lease$l$sfx" harsh/asp-varying "$se;$(lease $l)" \
      "asp on the varying links (outages), harsh settings of 2026-11-27, peer lease $l ms$sw"
  done
  for l in 500 1000; do
    add "asp-lease$l$sfx" harsh/asp "$se;$(lease $l)" \
      "asp on the static links, harsh settings of 2026-11-27, peer lease $l ms$sw"
  done
done
# Round five (diloco_sync.md): DiLoCo as the paper runs it, each outer step
# synchronous (outer_overlap = false: every round starts from the
# synchronised model), beside the overlapped step of the committed
# topology, asp and the LAN, from the harsh settings as committed since
# the 1 s lease. Three seeds.
before=
sync='s/^\[wan\]/[wan]\nouter_overlap = false/'
for seed in 1 2 3; do
  seeded $seed
  add "lan-now$sfx" harsh/lan "$se" "LAN baseline (rate decaying to 0.0005)$sw"
  add "asp-now$sfx" harsh/asp "$se" "asp as committed (1 s peer lease)$sw"
  add "diloco-h50-overlap$sfx" harsh/diloco "$se" \
    "diloco, H 50, one outer step in flight (as committed), 4-bit, outer lr 0.7, Nesterov 0.9$sw"
  for h in 25 50; do
    add "diloco-h$h-sync$sfx" harsh/diloco "$se;$sync;s/^averaging_period = .*/averaging_period = $h/" \
      "diloco, H $h, synchronous outer step (the paper's), 4-bit, outer lr 0.7, Nesterov 0.9$sw"
  done
done
# Round six (five_seeds.md): asp as committed on the static and the varying
# links beside the LAN run, five seeds in one invocation, for the spread
# of the time ratio (the selection scan's AVX-512 path since this round).
for seed in 1 2 3 4 5; do
  seeded $seed
  if [ "$seed" -gt 3 ]; then
    add "lan-now$sfx" harsh/lan "$se" "LAN baseline (rate decaying to 0.0005)$sw"
    add "asp-now$sfx" harsh/asp "$se" "asp as committed (1 s peer lease)$sw"
  fi
  add "asp-varying-now$sfx" harsh/asp-varying "$se" \
    "asp as committed (1 s peer lease) on the varying links (outages)$sw"
done
# Round seven (default_seeds.md): the default topology (three regions, two
# workers each) as committed, asp on its static and its varying links
# beside its LAN run, three seeds.
# The default scenario took the harsh settings below on 2026-11-27; these
# probes first take its committed topologies back to the settings before
# (dbefore, above), so that they still make the topologies their tables ran.
for seed in 1 2 3; do
  seeded $seed
  add "default-lan$sfx" default/lan "$dbefore;$se" "default topology: LAN baseline, 1 site x 6 workers$sw"
  add "default-asp$sfx" default/asp "$dbefore;$se" "default topology: asp as committed$sw"
  add "default-asp-varying$sfx" default/asp-varying "$dbefore;$se" \
    "default topology: asp as committed on the varying links (outages)$sw"
  # The harsh scenario's settings of 2026-11-27 (probes/endlr.md): the rate
  # decaying to 1% (endlr, round two's), the threshold following it, two
  # batches in flight.
  add "default-lan-endlr$sfx" default/lan "$dbefore;$se;$endlr" \
    "default topology: LAN baseline, rate decaying to 0.0005$sw"
  add "default-asp-endlr$sfx" default/asp "$dbefore;$se;$endlr;$follow;$(inflight 2)" \
    "default topology: asp, rate decaying to 0.0005, threshold following it, 2 batches in flight$sw"
  add "default-asp-varying-endlr$sfx" default/asp-varying "$dbefore;$se;$endlr;$follow;$(inflight 2)" \
    "default topology: asp on the varying links, rate decaying to 0.0005, threshold following it, 2 batches in flight$sw"
done
# Round eight (default_diloco.md): DiLoCo against asp on the default
# topology with its settings of 2026-11-27 (the rate decaying to 1%), three
# seeds: the synchronous step with H 25 (the best H on the harsh links) and
# streaming DiLoCo as the comparison runs it.
for seed in 1 2 3; do
  seeded $seed
  add "default-lan-now$sfx" default/lan "$se" "default topology: LAN baseline (rate decaying to 0.0005)$sw"
  add "default-asp-now$sfx" default/asp "$se" "default topology: asp as committed$sw"
  add "default-diloco-h25-sync$sfx" default/diloco "$se;$sync;s/^averaging_period = .*/averaging_period = 25/" \
    "default topology: diloco, H 25, synchronous outer step, 4-bit, outer lr 0.7, Nesterov 0.9$sw"
  add "default-diloco-stream$sfx" default/diloco-stream "$se" \
    "default topology: streaming diloco, H 50 in 5 fragments, 4-bit, outer lr 0.7, Nesterov 0.9$sw"
done
# Round nine (five_seeds_cuts.md): round six's probes again, once backlog
# cuts look only at what came since the last cut (and at each chunk whole
# every 8 cuts), beside asp with every cut looking at everything
# (backlog_revisit = 1, as before), five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  add "asp-revisit1$sfx" harsh/asp "$se;s/^\[wan\]\$/[wan]\nbacklog_revisit = 1/" \
    "asp, every backlog cut looking at every chunk whole (backlog_revisit = 1)$sw"
done
# Round ten (five_seeds_marks.md): round nine's probes again, once a part
# look keeps its marks until the chunk's next whole look (an update that
# was not significant is looked at again at every cut, as before).
# Then (varying_marks.md) the varying links alone, the new cuts beside
# backlog_revisit = 1, five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  add "asp-varying-revisit1$sfx" harsh/asp-varying "$se;s/^\[wan\]\$/[wan]\nbacklog_revisit = 1/" \
    "asp on the varying links (outages), every backlog cut looking at every chunk whole (backlog_revisit = 1)$sw"
done
# Round eleven (relay.md): batches for a peer whose link is out go through
# a third site after 1 s without an answer (relay_after_ms, docs/
# wan_replication.md), on the varying links beside asp as committed and
# the LAN, five seeds.
relay='s/^peer_lease_ms = .*/&\nrelay_after_ms = 1000/'
for seed in 1 2 3 4 5; do
  seeded $seed
  add "asp-varying-relay$sfx" harsh/asp-varying "$se;$relay" \
    "asp on the varying links (outages), batches relayed through a third site after 1 s without an answer$sw"
done
# Round twelve (varying_split.md): the varying links' trace split into its
# two parts (experiments/traces/cellular-split/): its outages at a constant
# rate otherwise, and its rate swings with the outages filled in, beside
# asp on the static and the varying links and the LAN, five seeds: which
# part costs asp its accuracy.
split=../../../../traces/cellular-split/Verizon-EVDO-driving
for seed in 1 2 3 4 5; do
  seeded $seed
  add "asp-varying-nooutage$sfx" harsh/asp-varying "$se;s|^variation = .*|variation = \"$split-no-outages.down\"|" \
    "asp on the varying links with their outages filled in (the rate swings kept)$sw"
  add "asp-varying-outageonly$sfx" harsh/asp-varying "$se;s|^variation = .*|variation = \"$split-outages-only.down\"|" \
    "asp on links that keep the varying links' outages at a constant rate otherwise$sw"
done
# Round thirteen (tied.md): asp's clock reports tied to the batches sent
# before them (tie_reports, docs/wan_replication.md), so that a peer whose
# batches queue behind a slow stretch holds the others at the drift bound
# as its late reports would, on the static and the varying links beside
# asp as committed and the LAN, five seeds.
tied='s/^selective_barrier = .*/&\ntie_reports = true/'
for seed in 1 2 3 4 5; do
  seeded $seed
  add_both tied "$tied" "each clock report taken once the batches sent before it landed (tie_reports)"
done
# Round fourteen (fresh.md): with int4 values nearly every backlog cut
# leaves residuals behind, and a backlog of residuals alone held a link's
# later batches back (in the accumulator while every link had one). With
# `fresh_first` a link whose window is open takes a tick's batch directly
# past such a backlog; with `tie_backlog` as well, a clock report stays
# before the updates still waiting to leave (in a backlog or in the
# accumulator), so that the drift bound counts the age of every update of
# a peer a site has applied. Both on top of tied reports (round thirteen),
# on the static and the varying links beside tied reports alone and the
# LAN, five seeds.
fresh='s/^selective_barrier = .*/&\ntie_reports = true\nfresh_first = true/'
freshbl='s/^selective_barrier = .*/&\ntie_reports = true\nfresh_first = true\ntie_backlog = true/'
for seed in 1 2 3 4 5; do
  seeded $seed
  add_both fresh "$fresh" "tied reports, a link's batches sent past a backlog of codec residuals (fresh_first)"
  add_both freshbl "$freshbl" "tied reports, fresh_first, each report kept before what waits to leave (tie_backlog)"
done

# Round fifteen (fresh_ds.md): round fourteen's reports kept before what
# waits to leave ended near the LAN on the varying links but waited at the
# drift bound four times as long; here with DS 16 and 24 instead of 8, on
# the static and the varying links beside tied reports alone and the LAN,
# five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  for ds in 16 24; do
    add_both "freshbl-ds$ds" "$freshbl;s/^staleness_ds = .*/staleness_ds = $ds/" \
      "tied reports, fresh_first, tie_backlog, DS $ds"
  done
done

# Round sixteen (lag.md): round fourteen's reports kept before what waits
# to leave held the sites at the drift bound for as long as a backlog
# lasted; here waiting updates keep a report back at most 4 or 8 clocks
# (tie_backlog_clocks), on the static and the varying links beside tied
# reports alone and the LAN, five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  for lag in 4 8; do
    add_both "freshbl-lag$lag" "${freshbl%/}\ntie_backlog_clocks = $lag/" \
      "tied reports, fresh_first, tie_backlog at most $lag clocks behind"
  done
done

# Round seventeen (window.md): with reports kept before what waits to
# leave, the sites worked at the drift cap and waited there most of the
# time, their reports held back by updates waiting for one of two slots
# in flight on links whose round trip lasts 5-16 clocks. Here with 4 and
# 8 batches in flight per link, on the static and the varying links
# beside tied reports alone and the LAN, five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  for w in 4 8; do
    add_both "freshbl-w$w" "$freshbl;s/^max_inflight_batches = [0-9]*/max_inflight_batches = $w/" \
      "tied reports, fresh_first, tie_backlog, $w batches in flight per link"
  done
done

# Round eighteen (window_split.md): round seventeen's tie_backlog with 4
# in flight waited twice as long on the varying links as on the static
# ones; here on the varying links' outages alone and their rate swings
# alone (round twelve's split traces, $split), beside the whole trace and
# the LAN, three seeds: which part the wait comes from.
w4="$freshbl;s/^max_inflight_batches = [0-9]*/max_inflight_batches = 4/"
for seed in 1 2 3; do
  seeded $seed
  add "asp-varying-nooutage-freshbl-w4$sfx" harsh/asp-varying "$se;$w4;s|^variation = .*|variation = \"$split-no-outages.down\"|" \
    "asp, tied reports, fresh_first, tie_backlog, 4 in flight, on the varying links with their outages filled in$sw"
  add "asp-varying-outageonly-freshbl-w4$sfx" harsh/asp-varying "$se;$w4;s|^variation = .*|variation = \"$split-outages-only.down\"|" \
    "asp, tied reports, fresh_first, tie_backlog, 4 in flight, on links with the varying links' outages at a constant rate otherwise$sw"
done

# Round nineteen (tied_late.md, one invocation with round twenty): tied
# reports alone, the one setting as fast as the targets on both kinds of
# links, with 4 batches in flight per link instead of 2 (8 too on the
# varying links): updates wait less for a slot, so what a tied report
# lets a peer train on is younger. On the static and the varying links
# beside tied reports with 2 in flight and the LAN, five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  for w in 4 8; do
    add_both "tied-w$w" "$tied;s/^max_inflight_batches = .*/max_inflight_batches = $w/" \
      "each clock report taken once the batches sent before it landed (tie_reports), $w batches in flight per link"
  done
done

# Round twenty (tied_late.md, one invocation with round nineteen): round
# seventeen's tie_backlog with 4 in flight kept every seed near the LAN's
# final accuracy but made each clock wait at the drift bound, from the
# start; the target is crossed at clock 550-650. Here it holds only over
# the training's last 400 or 300 clocks (tie_backlog_last_clocks), with
# tied reports and fresh_first before, on the varying links beside it
# over the whole run, tied reports alone and the LAN, five seeds.
# Round twenty-one (late_w8.md): the same with 8 batches in flight
# instead of 4, beside it with 4, tied reports alone with 8 (round
# nineteen's most accurate fast setting) and the LAN on the varying
# links, five seeds.
for seed in 1 2 3 4 5; do
  seeded $seed
  for w in 4 8; do
    for last in 400 300; do
      add_both "freshbl-w$w-last$last" "${freshbl%/}\ntie_backlog_last_clocks = $last/;s/^max_inflight_batches = .*/max_inflight_batches = $w/" \
        "tied reports, fresh_first, $w in flight, tie_backlog over the last $last clocks"
    done
  done
done

# Round twenty-two (late_static.md): the timed tie_backlog of rounds
# twenty and twenty-one on the static links (their probes come from
# those rounds' add_both), beside tied reports alone and the LAN, with
# the varying links' 8-in-flight, last-300-clocks run again, five seeds.

# Round twenty-three (new_seeds.md): the harsh scenario's setting since
# round twenty-two (tie_backlog over the last 400 clocks, 4 in flight)
# and tied reports alone on seeds 6 to 10, which no round before ran, on
# the static and the varying links beside the LAN.
for seed in 6 7 8 9 10; do
  seeded $seed
  add "lan-now$sfx" harsh/lan "$se" "LAN baseline (rate decaying to 0.0005)$sw"
  add_both tied "$tied" "each clock report taken once the batches sent before it landed (tie_reports)"
  add_both freshbl-w4-last400 "${freshbl%/}\ntie_backlog_last_clocks = 400/;s/^max_inflight_batches = .*/max_inflight_batches = 4/" \
    "tied reports, fresh_first, 4 in flight, tie_backlog over the last 400 clocks"
done

selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${default_probes[@]}")
for p in "${selected[@]}"; do
  [ -n "${base[$p]:-}" ] || { echo "unknown probe '$p'; probes: ${order[*]}" >&2; exit 2; }
done

mkdir -p "$topos"
for p in "${selected[@]}"; do
  t=$topos/$p.toml
  scenario=${base[$p]%%/*}
  sed -e "0,/^name = .*/s//name = \"probe-$p\"/" "$src/$scenario/topologies/${base[$p]#*/}.toml" > "$t"
  [ -n "${edits[$p]}" ] && sed -i -e "${edits[$p]}" "$t"
  [ -n "${DRY_RUN:-}" ] && continue
  echo "=== $p ($(date -u +%H:%M:%S))"
  "$geops" launch "$t" --out "$runs/$p" --replace --plain --timeout "$timeout" > "$runs/$p.log" 2>&1 \
    || echo "probe $p exited with $?" >&2
  printf '%s\n' "${what[$p]}" > "$runs/$p/what.txt"
done
[ -n "${DRY_RUN:-}" ] && { echo "topologies: $topos"; exit 0; }

{
  echo "# Probes: ${TITLE:-where harsh ASP loses clocks against its LAN baseline}"
  echo
  echo "command: ${TABLE:+TABLE=$TABLE }bash experiments/run_wan_probes.sh $*"
  echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!experiments/results' 2>/dev/null || echo '+local changes')"
  echo
  python3 experiments/wan_probes_table.py "$runs" "${selected[@]}"
} > "$table"
sed -i "s|$root/||g" "$table"
echo "results: $table"
