"""The PostgreSQL backend: one database shared by many hosts, its schema, lease, reads,
follower, deletes and asyncio methods.
"""
