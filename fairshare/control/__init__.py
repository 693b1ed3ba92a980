"""The policy controller (DESIGN.md "Who does what"): from a QuotaPolicy, the observed cluster, the stored
status and the time it decides everything the service does and returns typed actions; the operator
(`queue_manager`) and the simulator (`simulations`) only apply them."""
