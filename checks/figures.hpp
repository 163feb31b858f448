// checks/figures.hpp — figures drawn from the checks' own computations, for `attncert figures`
// (tools/attncert/drift_command.cpp renders them with the scripts of tools/attncert/figures/).
#pragma once

namespace attncert {
struct figure;
namespace checks {

/// Figure 5: the rank–heads trade-off of proofs/L4 for d = 4 and d = 8 — against the number of rank-one heads H,
/// the bound for every one-layer network (with and without a residual path, part D/F), the two-layer vote
/// construction's mean MSE over random directions (part F, an upper end: some direction set does this well), and
/// one full-rank head's MSE at λ = 100 and 1000 (part A).  Every number is an end of a certified enclosure, rounded
/// outward.  Polls the deadline.
figure rank_heads_figure();

}  // namespace checks
}  // namespace attncert
