"""``python -m proofs_check``: run the theorem checks (see ``proofs_check.report``)."""

from proofs_check.report import main

if __name__ == "__main__":
    raise SystemExit(main())
