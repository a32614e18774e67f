"""The `strom` command and process supervision."""
