// The kernel's tuning, passed in from Python as one struct (KernelOptions in _compiled.py,
// where each field is documented); the defaults are what the operator uses.
#pragma once

#include <cstdint>
#include <optional>

namespace causal_ot {

struct KernelOptions {
  bool series = true;            // long rows may take the series solve (else the joint loop)
  int stream_stores = -1;        // output by streaming stores: -1 by size, 0 never, 1 always
  bool poison_output = false;    // fill the output with NaN before solving (a check aid)
  std::optional<std::int64_t> team_from;  // the team's first shared row; none: by exchange cost
  std::optional<double> exchange_ns;      // the exchange cost to choose it by; none: measured
  std::optional<double> team_give_up;     // waiting share that dissolves a team; < 0: at once
  std::optional<std::int64_t> zero_ahead;  // most rows worker 1 zeroes before the hand-over
};

}  // namespace causal_ot
