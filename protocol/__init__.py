"""The Kafka wire protocol: message schemas as data, one generic codec, headers, errors.

    schema    the compact schema language (schemas/*.schema) and its parser
    types     primitive readers and writers (a bounds-checked read cursor, a write buffer)
    codec     encoders/decoders compiled per message version from the schemas
    messages  the registry: every API Strom speaks, by key and name
    headers   request header v0-v2 and response header v0-v1, framing
    errors    Kafka's error codes
"""
