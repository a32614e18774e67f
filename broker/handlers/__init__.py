"""Request handlers, grouped by RPC family.

Each module holds a class built with the narrow services its requests use (the
ReplicaManager, the fetch waiters, a getter of the metadata image, a coordinator, the
controller channel, the BrokerAuthorizer), never the Broker itself; its ``apis()`` lists the
protocol.dispatch.Api entries it serves, each handler taking ``(ctx: RequestContext, req)``.
broker/server.py builds them all and hands their APIs to the Dispatcher.
"""
