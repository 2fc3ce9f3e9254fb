"""The base room: what every other room may use, itself using nothing of core.

Lossless JSON values (``json_values``), the project's fixed names (``names``), closing at
the end of a ``with`` block (``closing``), the store-URL rule an error's message uses
(``url_for``), and the table of the project's own plugins (``known_plugins``).

It is the lowest room (tests/meta/test_layers.py), with the public modules beside it
(``jscompat``, ``vocabulary``, ``lazy``): it imports nothing of core.
"""
