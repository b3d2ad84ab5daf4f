"""Reference PyTorch operators of docs/theory.md and one executable check per theorem.

Run ``python -m proofs_check`` for the report.
"""

__all__: list[str] = []
