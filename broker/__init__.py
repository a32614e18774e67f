"""The broker process: network server, request handlers, groups, the metadata image."""
