"""Length-extrapolation experiment (issue 15); see docs/extrapolation.md."""
