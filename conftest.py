"""Collection rules for the whole tree (``--doctest-modules`` imports every module)."""

import importlib.util

# The Triton kernels' module imports triton at its top; where triton is not installed the
# operator falls back to pure torch without importing it, and so does collection.
collect_ignore = ([] if importlib.util.find_spec("triton") is not None
                  else ["proofs_check/operators/causal_ot/_triton_kernels.py"])
