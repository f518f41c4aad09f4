"""``pytest --perfgate``: the plugin (options and hooks), the session and the fixture."""
