"""Engine worker processes, the admission queue in front of them, and their supervisor."""
