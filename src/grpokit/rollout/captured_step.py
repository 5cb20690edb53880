"""The decode step recorded once as a CUDA graph with `torch.cuda.CUDAGraph` and replayed, with no compiler
(`rollout.decode=graphs`, the default graphed path): about 0.1 s to capture, against tens of seconds of
Dynamo + inductor per shape (../shared/reviews/gpu-decode-review.md, item 1).

- Two warm-up calls run the step eagerly on a side stream (as torch's CUDA-graph notes ask, so lazy
  initialisations and the allocator's first allocations happen outside the capture); they are real steps.
- The third call copies its inputs into static tensors, records the step into the graph (a recording runs no
  kernel), then replays it once; every later call copies its inputs in and replays. The cache is written in place
  at its static addresses, and outputs are cloned, since the next replay overwrites them.
- A different input shape, or a step that records nothing, is an error the caller turns into the static path.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

WARMUP_CALLS = 2


class CapturedStep:
    """`fn(cache, *tensors, settings)` captured for one shape of `tensors`; `graphs` counts recordings (0 or 1)."""

    def __init__(self, fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.fn = fn
        self.calls = 0
        self.graphs = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: list[torch.Tensor] = []
        self.outputs: tuple[torch.Tensor, ...] = ()

    def __call__(self, cache: object, *args: object) -> tuple[torch.Tensor, torch.Tensor]:
        tensors, settings = [a for a in args if isinstance(a, torch.Tensor)], args[len(args) - 1]
        if self.graph is None and self.calls < WARMUP_CALLS:
            self.calls += 1
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                out = self.fn(cache, *args)
            torch.cuda.current_stream().wait_stream(side)
            return out
        if self.graph is None:
            self.inputs = [t.clone() for t in tensors]
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outputs = self.fn(cache, *self.inputs, settings)
            self.graphs += 1
        else:
            for dst, src in zip(self.inputs, tensors, strict=True):
                if dst.shape != src.shape:
                    raise RuntimeError(f"captured decode step of shape {tuple(dst.shape)} given {tuple(src.shape)}")
                dst.copy_(src)
        self.graph.replay()
        new, lp = self.outputs
        return new.clone(), lp.clone()
