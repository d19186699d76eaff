"""A Hugging Face `transformers.Trainer` fine-tuning script, with the probe's lines: a script
whose training loop is the Trainer's, not its own.

Its shape is transformers' `examples/pytorch/language-modeling/run_clm.py`: its arguments
parsed by `HfArgumentParser` into a dataclass of its own and `TrainingArguments` (so
`--dataloader_num_workers`, `--per_device_train_batch_size`... are the Trainer's own flags), a
causal language model, a data set of token blocks (run_clm's `group_texts`: `input_ids`,
`attention_mask`, `labels` a copy of the ids), `default_data_collator`, and
`Trainer(model, args, train_dataset, eval_dataset, data_collator).train()`, then `evaluate()`.
Here the model is a small GPT-2 made from its config (no download), the blocks are random
token ids made in memory, `--step_ms` makes each forward a GPU's (the thread held, no core
used), and `--read_ms` injects a known cost (a sleep per sample read).

The probe's lines: the import and a Trainer subclass, `ProbedTrainer`, used in place of
`Trainer`. Its `get_train_dataloader` builds the Trainer's own train loader (its sampler, its
collator with the unused columns removed, `seed_worker`, the `dataloader_*` arguments,
`accelerator.prepare`) with `probe.loader` in place of `DataLoader`, and returns it wrapped so
that the Trainer's loop iterates `probe.measure(...)`; `evaluate` and the checkpoints run
inside `probe.untimed()`.

    python jobs/hf_trainer_train.py --output_dir /tmp/out --use_cpu       # alone
    torchrun --nproc-per-node 2 jobs/hf_trainer_train.py --output_dir ...  # 2 ranks
    harness run jobs/hf_trainer_script-cpu.yaml                            # a sweep
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch
from torch.utils.data import Dataset
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    default_data_collator,
    set_seed,
)

import harness.probe as probe


class ProbedTrainer(Trainer):
    """The Trainer, its train loader measured by the harness (the probe's lines)."""

    def get_train_dataloader(self) -> Any:
        # The Trainer's own loader, every argument as the Trainer gives it, made by probe.loader:
        # under the harness the point's settings take the place of the dataloader_* arguments.
        with mock.patch("transformers.trainer.DataLoader", probe.loader):
            prepared = super().get_train_dataloader()
        return Measured(prepared, self.args.device)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        with probe.untimed():  # the evaluation, out of the measured windows
            return super().evaluate(*args, **kwargs)

    def _save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        with probe.untimed():  # the checkpoint, too
            super()._save_checkpoint(*args, **kwargs)


class Measured:
    """The prepared loader as the Trainer's loop reads it: each epoch's `iter()` is
    `probe.measure(loader)`; `len()`, `set_epoch`, `dataset`, `batch_sampler` are the loader's."""

    def __init__(self, loader: Any, device: torch.device) -> None:
        self.loader, self.device = loader, device

    def __iter__(self) -> Iterator[Any]:
        return probe.measure(self.loader, self.device)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


@dataclass
class ScriptArguments:
    """run_clm's model and data arguments, for a model made from its config and blocks made in
    memory; and the known costs."""

    block_size: int = field(default=64, metadata={"help": "tokens a block (run_clm's --block_size)"})
    train_blocks: int = field(default=256, metadata={"help": "blocks in the training set"})
    eval_blocks: int = field(default=32, metadata={"help": "blocks in the evaluation set"})
    vocab_size: int = field(default=512, metadata={"help": "the model's vocabulary"})
    n_layer: int = field(default=2, metadata={"help": "the model's layers"})
    n_embd: int = field(default=32, metadata={"help": "the model's width"})
    step_ms: float = field(default=0.0, metadata={"help": "a sleep per forward: a GPU's step"})
    read_ms: float = field(default=0.0, metadata={"help": "a sleep per sample read"})


class TokenBlocks(Dataset[dict[str, torch.Tensor]]):
    """run_clm's `lm_datasets["train"]`: blocks of `block_size` token ids, labels a copy of the
    ids (the model shifts them). `read_s` is a known cost (a sleep per sample)."""

    def __init__(self, blocks: torch.Tensor, read_s: float = 0.0) -> None:
        self.blocks, self.read_s = blocks, read_s

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        time.sleep(self.read_s)
        ids = self.blocks[i].clone()
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def main() -> None:
    parser = HfArgumentParser((ScriptArguments, TrainingArguments))  # type: ignore[arg-type]
    script_args, training_args = parser.parse_args_into_dataclasses()
    set_seed(training_args.seed)

    ids = torch.randint(
        0,
        script_args.vocab_size,
        (script_args.train_blocks + script_args.eval_blocks, script_args.block_size),
    )
    train_dataset = TokenBlocks(ids[: script_args.train_blocks], read_s=script_args.read_ms / 1000)
    eval_dataset = TokenBlocks(ids[script_args.train_blocks :])

    config = GPT2Config(
        vocab_size=script_args.vocab_size,
        n_positions=script_args.block_size,
        n_embd=script_args.n_embd,
        n_layer=script_args.n_layer,
        n_head=2,
        bos_token_id=script_args.vocab_size - 1,  # GPT-2's 50256 is outside a small vocabulary
        eos_token_id=script_args.vocab_size - 1,
    )
    model = GPT2LMHeadModel(config)
    if script_args.step_ms > 0:  # a GPU's step: the thread waits, no core used
        model.register_forward_hook(lambda *_: time.sleep(script_args.step_ms / 1000))

    trainer = ProbedTrainer(  # was: Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=default_data_collator,
    )
    train_result = trainer.train()
    trainer.log_metrics("train", train_result.metrics)
    trainer.log_metrics("eval", trainer.evaluate())


if __name__ == "__main__":
    main()
