"""``python -m proofs_check.extrapolation`` (see ``proofs_check.extrapolation.cli``)."""

import sys

from proofs_check.extrapolation.cli import main

if __name__ == "__main__":
    sys.exit(main())
