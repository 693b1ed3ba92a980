"""The ledger: accounting of every workload life, quota over time and the audit trail (docs/ledger.md)."""
