"""The old path of ``priors.mass``: window and distant masses (docs/theory.md §5–§6).

``from priors.window import mass_report`` keeps working; new code imports ``priors.mass``,
which holds the library (``MassReport``, ``masses``, ``mass_report``).
"""

from priors.mass import MassReport, mass_report, masses

__all__ = ["MassReport", "mass_report", "masses"]
