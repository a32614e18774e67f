"""Who asks and what they may do: TLS, SASL and the authorizer (docs/architecture.md)."""
