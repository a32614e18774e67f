"""The controller process: the metadata state machine on the KRaft log."""
