// attncert/drift/runs.hpp — a drift sweep split into runs of its grid (attncert.distributed.drift):
// the wire form of one run's result, and the merge of the runs' results into the whole sweep's.
//
// A run is a drift_request whose `grid` is a stretch of the whole sweep's grid; consecutive runs share
// their end points (run c ends where run c + 1 starts), so that each run bisects every switch between
// its own points and the runs together bisect every switch of the grid.  Each point is computed by the
// same code whatever the split, so the merge of complete runs is the single sweep's result, point for
// point and interval for interval (tests/drift/runs.cpp checks it; tests/python/test_distributed.py on
// a cluster).
//
// Within a budget a run may stop early (its first points; drift_result::partial) or not run at all.  The
// merge keeps every point computed, once, and records the grid points left out as gaps
// (drift_result::not_computed), wherever they lie.  Guarantee: each merged point and each interval
// end is one a run computed; an interval never spans a gap (the runs' intervals lie within their
// computed points, and two are joined only through a point both runs computed).  When a run stopped
// early, the switch between its last point and the next run's first was not bisected: the merge says
// so with bisection_stopped, as a sweep stopped during its bisection does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attncert/drift/sweep.hpp"

namespace attncert {

/// A run's result as text (JSON) that drift_result_from_wire reads back exactly: every binary64 is
/// written as a hexadecimal float, so nothing is rounded on the way (not even ±inf or NaN).
std::string drift_result_wire(const drift_result& r);
/// The result a wire text holds.  Errors: input_error ("drift run: ...") on a text that is not one.
drift_result drift_result_from_wire(const std::string& text);

/// The whole sweep's result from its runs' results, in grid order (std::nullopt: a run not computed).
/// `whole` is the whole sweep's request (its grid empty: drift_grid gives the planned points); each run
/// used the same settings on a stretch of that grid, consecutive runs sharing their end points.
/// Errors (input_error): no run computed; a run whose recipes and policies are not the sweep's; a point
/// that is not on the planned grid or not after the points before it (runs out of order).
drift_result merge_drift_runs(const drift_request& whole, const std::vector<std::optional<drift_result>>& runs);

}  // namespace attncert
