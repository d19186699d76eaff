"""Background samplers that record what the host (and the GPU) did while a rung ran."""
