"""The plugin room: pluggy's manager and its typed facade, core's plugin, the entry points.

The manager and its typed facade (``manager``), core's own plugin (``core_plugin``),
and the entry points found without importlib.metadata (``entry_points``).

It may import the rooms below it: ``_schema``, ``_errors`` and ``_base`` (and the
public modules beside them); ``hookspecs`` stands beside it.
"""
