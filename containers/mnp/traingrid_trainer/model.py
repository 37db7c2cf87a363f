"""ResNet-50 v1.5 (stride on the 3x3 convolution), as the reference ImageNet runs train it.

Written out rather than taken from torchvision, whose builds must match the exact torch build
(the image's and a CPU venv's differ); the last BatchNorm of each block starts at zero, so each
block starts as the identity (Goyal et al.), which large-batch training relies on.
"""

from __future__ import annotations

from torch import Tensor, nn

LAYERS = (3, 4, 6, 3)
CLASSES = 1000


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        last_norm = nn.BatchNorm2d(out_channels)
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, width, 1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, out_channels, 1, bias=False), last_norm,
        )
        nn.init.zeros_(last_norm.weight)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


def resnet50(classes: int = CLASSES) -> nn.Module:
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
        nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    channels = 64
    for stage, blocks in enumerate(LAYERS):
        width = 64 * 2**stage
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(Bottleneck(channels, width, stride))
            channels = width * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]
    model = nn.Sequential(*layers)
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    return model
