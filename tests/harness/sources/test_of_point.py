"""harness/sources/: a point's loader reaches the window one way, `source.stream(rung)`."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import dataloader, given_loader
from harness.sources.built import BuiltSource
from harness.sources.given import GivenSource
from harness.sources.length import length
from harness.sources.of_point import of_point
from harness_schema.settings import LoaderSettings


def point():  # type: ignore[no-untyped-def]
    spec = parse_spec(
        "name: s\nworkload: {dataset: fake_cifar, dataset_args: {size: 16}, model: linear, batch_size: 4, "
        "device: cpu}\nmeasure: {warmup_steps: 1, steps: 1}\nrungs: [full]\nloader: {num_workers: 0}\n"
    )
    (p,) = expand(spec).points
    return p


def test_a_built_and_a_given_loader_stream_their_rungs_the_same_way() -> None:
    data = TensorDataset(torch.arange(16.0).unsqueeze(1), torch.arange(16))
    where = dataloader.Placement(device=torch.device("cpu"))
    built = of_point(point(), where, dataset=data)
    assert isinstance(built, BuiltSource) and built.dataset is data and not built.in_threads()
    x, _ = built.stream("host_batch").next()
    assert x.shape == (4, 1)
    loader = DataLoader(data, batch_size=4)
    given = given_loader.GivenLoader(loader=loader, name="DataLoader", recorded=LoaderSettings())
    source = of_point(point(), where, given=given)
    assert isinstance(source, GivenSource) and source.dataset is data
    assert source.stream("full").next()[0].shape == (4, 1)


def test_a_loaders_length_is_none_where_it_says_none() -> None:
    assert length([1, 2, 3]) == 3
    assert length(iter([1, 2, 3])) is None
