"""Built-in models. Every factory takes `num_classes` (from the dataset) and keyword options."""

from __future__ import annotations

import torch
import torchvision
from torch import nn


def resnet18(*, num_classes: int) -> nn.Module:
    # Random weights: nothing is downloaded, and the step costs the same as pretrained.
    return torchvision.models.resnet18(weights=None, num_classes=num_classes)


def resnet50(*, num_classes: int) -> nn.Module:
    return torchvision.models.resnet50(weights=None, num_classes=num_classes)


def toy_conv(*, num_classes: int, width: int = 32, depth: int = 4) -> nn.Module:
    """A small conv net like the caching article's toy model: conv/ReLU/pool blocks, a linear head."""
    if width < 1 or depth < 1:
        raise ValueError(f"width and depth must be >= 1 (got {width}, {depth})")
    layers: list[nn.Module] = []
    channels = 3
    for i in range(depth):
        out = width * 2**i
        layers += [nn.Conv2d(channels, out, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
        channels = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes)]
    return nn.Sequential(*layers)


def linear(*, num_classes: int, pool: int = 4) -> nn.Module:
    """Nearly free: a pooled linear classifier, for measuring the input pipeline alone."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(pool), nn.Flatten(), nn.Linear(3 * pool * pool, num_classes))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if isinstance(p, torch.Tensor))
