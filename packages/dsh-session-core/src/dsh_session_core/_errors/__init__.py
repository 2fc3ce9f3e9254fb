"""The error hierarchy, by concern; :mod:`dsh_session_core.errors` re-exports every class.

One module per group: the root (``base``), a refused append (``append``), a session and
its log (``log``), plugins (``plugin``), durable stores (``store``), encrypted stores
(``crypt``) and the read model (``inspect``). Every class names the public module as
its own.

It may import only the base room (``_base``, and the public modules beside it).
"""
