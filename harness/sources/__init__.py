"""The loader seam: where a rung's batches come from. A point's loader reaches the timed loop
one way, `source.stream(rung)` (base.LoaderSource), whichever of three it is:

- `built.BuiltSource`: a DataLoader the harness builds from the spec (the workload's dataset
  and the user's collate, sampler or batch sampler) with the point's settings;
- `given.GivenSource`: a loader the harness did not build and measures as it is (a
  `workload.loader` factory's, a script's DataLoader subclass or loader of its own);
- `recorded.recorded_source`: what a script handed to `probe.loader` (or built itself),
  recorded and rebuilt as a BuiltSource with the point's settings.
"""
