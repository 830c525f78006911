"""Symbolic proofs of the worst-case privacy loss, one module per mechanism module stem."""
