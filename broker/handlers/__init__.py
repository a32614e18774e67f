"""Request handlers, grouped by RPC family. Each module exposes ``apis(broker)``."""
