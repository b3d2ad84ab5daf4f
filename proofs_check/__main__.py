"""``python -m proofs_check``: run the theorem checks (see ``proofs_check.report``)."""

import sys

try:
    import torch  # noqa: F401  (the checks need it; say so in one line when it is missing)
except ImportError:
    print(
        "proofs_check: error: torch is not installed; install it with "
        "pip install -e '.[torch]' (or your own torch build)",
        file=sys.stderr,
    )
    raise SystemExit(2) from None

from proofs_check.report import main

if __name__ == "__main__":
    raise SystemExit(main())
