"""The differential harness: the model of Kueue (fairshare) against the real Kueue on random states."""
