"""The transaction coordinator (KIP-98, KIP-360, KIP-890): ``state`` (a transactional id's
state and Kafka's transitions), ``storage`` (the records of ``__transaction_state``) and
``coordinator`` (the pure core a shell steps)."""
