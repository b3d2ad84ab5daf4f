// Compiled CPU kernels of the prefix-consistent causal OT operator (docs/theory.md §2, Lemma 2.1)
// and their Python bindings; the one translation unit, which includes the rest:
//
//   fast_math.h   exp, log and the small-step expm1/log1p polynomials, one template over T
//   work.h        a row's work buffers and statistics
//   team.h        the team of two workers on one slice, and its barrier
//   row_solve.h   the state of one row's solve, shared by its phases
//   newton.h      the joint Newton passes and loop, and the safeguarded fallback
//   row_start.h   the closed-form start, zeta, and the near keys' solve
//   series.h      the series solve of long rows
//   row_driver.h  one row from scores to weights, in phases
//   store.h       streaming stores and prefetch
//   slice.h       a slice's rows, the forward over all slices
//   backward.h    the exact backward (reverse row sweep)
//   options.h     the tuning passed in from Python (KernelOptions)
//
// The forward solves the rows in order (row l needs only rows < l), one (batch, head) slice
// per task of torch's at::parallel_for (OpenMP, torch's own runtime; serial without it), a
// single slice on two or more threads by a team of two workers. The Python side is
// _compiled.py, which names the statistics returned here.
#include <torch/extension.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>

#include "backward.h"
#include "options.h"
#include "slice.h"

namespace causal_ot {
namespace {

namespace py = pybind11;

py::dict stats_dict(const std::vector<SliceStats>& ss) {
  const std::int64_t B = std::int64_t(ss.size());
  const auto column = [&](double SliceStats::*field) {
    auto t = torch::empty({B}, torch::kFloat64);
    double* p = t.data_ptr<double>();
    for (std::int64_t b = 0; b < B; ++b) p[b] = ss[b].*field;
    return t;
  };
  py::dict d;
  d["newton_steps"] = column(&SliceStats::newton_steps);
  d["error_estimate"] = column(&SliceStats::error_estimate);
  d["converged"] = column(&SliceStats::converged);
  d["fallback_rows"] = column(&SliceStats::fallback_rows);
  d["invalid_row"] = column(&SliceStats::invalid_row);
  d["team_rows"] = column(&SliceStats::team_rows);
  d["series_rows"] = column(&SliceStats::series_rows);
  d["team_from"] = column(&SliceStats::team_from);
  d["exchange_ns"] = column(&SliceStats::exchange_ns);
  d["guess_rows"] = column(&SliceStats::guess_rows);
  return d;
}

KernelOptions make_options(bool series, int stream_stores, bool poison_output,
                           std::optional<std::int64_t> team_from,
                           std::optional<double> exchange_ns,
                           std::optional<double> team_give_up,
                           std::optional<std::int64_t> zero_ahead) {
  TORCH_CHECK(stream_stores >= -1 && stream_stores <= 1, "stream_stores: -1, 0 or 1");
  return KernelOptions{series, stream_stores, poison_output, team_from, exchange_ns,
                       team_give_up, zero_ahead};
}

// Forward: s (B, n, n) float32/float64 (entries above the diagonal ignored, -inf masked).
// Returns the weights (B, n, n) and the statistics, a dict of (B,) float64 tensors.
std::tuple<torch::Tensor, py::dict> forward(torch::Tensor s, double rho, double tol,
                                            std::int64_t max_iter, const KernelOptions& opt) {
  TORCH_CHECK(s.dim() == 3 && s.size(1) == s.size(2), "scores must be (B, n, n)");
  TORCH_CHECK(s.device().is_cpu(), "CPU tensors only");
  TORCH_CHECK(max_iter >= 1, "max_iter must be >= 1");
  s = s.contiguous();
  auto out = torch::empty_like(s);  // every entry written by the kernel
  if (opt.poison_output) out.fill_(std::numeric_limits<double>::quiet_NaN());
  const std::int64_t B = s.size(0), n = s.size(1);
  std::vector<SliceStats> stats(B);
  if (s.scalar_type() == torch::kFloat64) {
    forward_slices<double>(B, n, s.data_ptr<double>(), out.data_ptr<double>(), rho, tol,
                           max_iter, opt, stats.data());
  } else {
    TORCH_CHECK(s.scalar_type() == torch::kFloat32, "float32 or float64 only");
    forward_slices<float>(B, n, s.data_ptr<float>(), out.data_ptr<float>(), rho, tol, max_iter,
                          opt, stats.data());
  }
  return {out, stats_dict(stats)};
}

template <typename T>
RowStats stream_row_impl(torch::Tensor& srow, torch::Tensor& col, torch::Tensor& lcol,
                         torch::Tensor& out, double rho, double tol, std::int64_t max_iter,
                         const KernelOptions& opt) {
  const std::int64_t l = srow.size(0);
  thread_local Work<T> w;
  if (std::int64_t(w.s.size()) < l) w.resize(std::max<std::int64_t>(l, 2 * w.s.size()));
  Member alone;
  w.e_ref = std::numeric_limits<T>::quiet_NaN();  // (no guess from another call's row)
  w.ahead_row = -1;
  const RowParams<T> prm{T(rho / (1.0 - rho)), T(1.0 - rho), tol, max_iter, opt};
  const RowIo<T> io{l, srow.data_ptr<T>(), col.data_ptr<T>(), lcol.data_ptr<T>(),
                    out.data_ptr<T>()};
  return solve_row<T>(io, prm, w, alone);
}

// One row of the stream: srow (l), col and lcol (>= l, updated in place). Returns the row's
// weights and its statistics (a dict of floats).
std::tuple<torch::Tensor, py::dict> stream_row(torch::Tensor srow, torch::Tensor col,
                                               torch::Tensor lcol, double rho, double tol,
                                               std::int64_t max_iter, const KernelOptions& opt) {
  TORCH_CHECK(srow.dim() == 1 && col.is_contiguous() && lcol.is_contiguous(), "bad buffers");
  TORCH_CHECK(max_iter >= 1, "max_iter must be >= 1");
  srow = srow.contiguous();
  const std::int64_t l = srow.size(0);
  TORCH_CHECK(col.size(0) >= l && lcol.size(0) >= l, "column buffers too short");
  auto out = torch::empty_like(srow);
  RowStats st;
  if (srow.scalar_type() == torch::kFloat64) {
    st = stream_row_impl<double>(srow, col, lcol, out, rho, tol, max_iter, opt);
  } else {
    TORCH_CHECK(srow.scalar_type() == torch::kFloat32, "float32 or float64 only");
    st = stream_row_impl<float>(srow, col, lcol, out, rho, tol, max_iter, opt);
  }
  py::dict d;
  d["newton_steps"] = st.iters;
  d["error_estimate"] = st.resid;
  d["converged"] = st.ok;
  d["fallback"] = st.fallback;
  d["invalid_row"] = st.bad;
  return {out, d};
}

torch::Tensor backward(torch::Tensor a, torch::Tensor gout, double rho) {
  TORCH_CHECK(a.dim() == 3 && a.size(1) == a.size(2) && a.sizes() == gout.sizes(),
              "weights and grad must be (B, n, n)");
  a = a.contiguous();
  gout = gout.contiguous().to(a.scalar_type());
  auto gs = torch::empty_like(a);  // every entry written by the kernel
  const std::int64_t B = a.size(0), n = a.size(1);
  if (a.scalar_type() == torch::kFloat64) {
    backward_slices<double>(B, n, a.data_ptr<double>(), gout.data_ptr<double>(),
                            gs.data_ptr<double>(), rho);
  } else {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32, "float32 or float64 only");
    backward_slices<float>(B, n, a.data_ptr<float>(), gout.data_ptr<float>(),
                           gs.data_ptr<float>(), rho);
  }
  return gs;
}

}  // namespace
}  // namespace causal_ot

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  using causal_ot::KernelOptions;
  py::class_<KernelOptions>(m, "KernelOptions")
      .def(py::init(&causal_ot::make_options), py::arg("series"), py::arg("stream_stores"),
           py::arg("poison_output"), py::arg("team_from"), py::arg("exchange_ns"),
           py::arg("team_give_up"), py::arg("zero_ahead"));
  m.def("forward", &causal_ot::forward, "causal OT forward (row Newton), CPU", py::arg("s"),
        py::arg("rho"), py::arg("tol"), py::arg("max_iter"), py::arg("options"));
  m.def("stream_row", &causal_ot::stream_row, "one streaming row, CPU", py::arg("srow"),
        py::arg("col"), py::arg("lcol"), py::arg("rho"), py::arg("tol"), py::arg("max_iter"),
        py::arg("options"));
  m.def("backward", &causal_ot::backward, "causal OT backward (reverse row sweep), CPU",
        py::arg("a"), py::arg("gout"), py::arg("rho"));
}
