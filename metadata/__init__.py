"""The cluster metadata image: the state that replaying committed metadata records builds.
The controller decides from it; brokers serve from it. Imports protocol only."""
