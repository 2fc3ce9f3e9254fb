"""Encryption at rest: the sealing backend wrapper, the sealed boxes, the ledger's sealed
notes, and rekeying.
"""
