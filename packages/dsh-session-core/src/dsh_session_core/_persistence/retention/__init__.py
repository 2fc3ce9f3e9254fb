"""Retention: the ledger of marks and removals, policies, their plans and runs, and the
recorded removal every door goes through.
"""
