"""Running one point on one rank: the timed loop, the ladder's streams, the train step, the process group."""
