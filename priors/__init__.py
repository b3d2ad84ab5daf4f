"""Exact mathematics of positional priors for (causal optimal-transport) attention.

No torch here, and nothing heavy at import time: ``python -m priors.margin`` must start
fast. Import the submodules you need (``priors.harmonic``, ``priors.mass``, ...).
See docs/theory.md §4–§7 for the statements computed here.
"""

__all__: list[str] = []
