"""Examples of a USER's pipeline: what a user of the harness writes, not parts of the harness.

Each module is a whole pipeline on the libraries its users use, written as they write it, and
named in a spec by its factories, as a user's own module would be:

- `harness.examples.text`: variable-length token sequences in dict samples, a padding collate,
  a length-bucketing batch sampler, a small causal LM whose forward returns `.loss`
  (Hugging Face style). Jobs: `jobs/text_lm.yaml`, `jobs/text_lm-cpu.yaml`.
- `harness.examples.segmentation`: image and mask through paired `torchvision.transforms.v2`
  transforms (`tv_tensors.Image`, `tv_tensors.Mask`), a small encoder-decoder, a per-pixel
  loss. Jobs: `jobs/segmentation.yaml`, `jobs/segmentation-cpu.yaml`.
- `harness.examples.shards_stream`: JPEG samples in tar shards read as a stream with
  `webdataset`, split by rank and by worker, decoded in the loop. Jobs:
  `jobs/shards_stream.yaml`, `jobs/shards_stream-cpu.yaml`.

They live inside the `harness` package only so that a spec can name them
(`dataset: harness.examples.text:make_dataset`) wherever the harness is installed: inline, in
the local backend's subprocesses and in a Slurm job, with no PYTHONPATH to set. Nothing in the
harness imports them, and they import nothing of the harness, so each can be copied out as the
start of a user's own pipeline module. The tar shards of the stream are written by
`harness make-data ... --webdataset` (harness/workloads/make_data.py).
"""
