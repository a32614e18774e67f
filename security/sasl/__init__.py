"""SASL authentication (KIP-152): the mechanisms' server-side state machines (``plain``,
``scram``, ``oauthbearer``), Kafka's JAAS config syntax (``jaas``), a listener's SASL settings
(``config``), the SaslHandshake and SaslAuthenticate handlers (``apis``) and a node's own
client side (``client``)."""
