"""The plugin room: pluggy's manager and its typed facade, core's own plugin, and the entry
points found without importlib.metadata.
"""
