"""The DataLoader grid: the best configuration per node and the cheapest tied with it
(`recommend`), whether prefetch_factor or num_workers absorbs the wait's tail (`tail`), and two
sets of results configuration by configuration (`compare`)."""
