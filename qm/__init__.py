"""`qm`: the command-line entry point of the queue manager."""
