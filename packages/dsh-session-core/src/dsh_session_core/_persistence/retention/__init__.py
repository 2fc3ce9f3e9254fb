"""Retention: the ledger of marks and removals, policies, their plans and runs.

The ledger (``ledger``), the policy and what a person writes in one (``policy``), the
pure planner (``plan``), running a policy on a store (``run``), and the recorded removal
every door goes through (``removal``).

It may import ``projections``, ``encryption``, ``backends``, the root of
``_persistence`` and the rooms below it; never the store.
"""
