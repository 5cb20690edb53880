"""Rollouts with transformers `generate`: batched, left-padded, G samples per prompt, stopping as soon as every
sequence has ended. Shares the learner's model object, so weight sync is free."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import torch

from .base import ENGINES, RolloutOutput, SamplingParams, SharedModelEngine, left_pad


@ENGINES.register("hf-generate")
class HFGenerateEngine(SharedModelEngine):
    """transformers `generate` engine; `autocast` is a context factory (e.g. bf16 autocast on CPU)."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: object,
        *,
        autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
        max_batch: int = 64,
    ) -> None:
        super().__init__(model, tokenizer, autocast=autocast)
        self.max_batch = max_batch

    @torch.no_grad()
    def _generate_chunk(self, prompts: list[list[int]], params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask = left_pad(prompts, self.pad_id)
        device = next(self.model.parameters()).device
        kwargs = dict(
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else None,
            max_new_tokens=params.max_new_tokens,
            min_new_tokens=params.min_new_tokens or None,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
            return_dict_in_generate=True,
            output_scores=True,
        )
        with self.autocast():
            out = self.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs)
        gen = out.sequences[:, ids.shape[1] :].cpu()
        # scores are the processed logits (temperature, top-k, top-p applied): the sampler's distribution
        logps = []
        for t, s in enumerate(out.scores):
            lp = torch.log_softmax(s.float(), dim=-1)
            logps.append(lp.gather(1, gen[:, t : t + 1].to(lp.device)).squeeze(1).cpu())
        samp = torch.stack(logps, 1) if logps else torch.zeros(gen.shape)
        return gen, samp

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> RolloutOutput:
        t0 = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        expanded = [p for p in prompts for _ in range(params.n)]
        index = torch.arange(len(prompts)).repeat_interleave(params.n)
        gens, samps = [], []
        try:
            for s in range(0, len(expanded), self.max_batch):
                g, lp = self._generate_chunk(expanded[s : s + self.max_batch], params)
                gens.append(g)
                samps.append(lp)
        finally:
            self.model.train(was_training)
        width = max(g.shape[1] for g in gens)
        comp = torch.full((len(expanded), width), self.pad_id, dtype=torch.long)
        samp = torch.zeros((len(expanded), width), dtype=torch.float32)
        row = 0
        for g, lp in zip(gens, samps):
            comp[row : row + g.shape[0], : g.shape[1]] = g
            samp[row : row + g.shape[0], : lp.shape[1]] = lp
            row += g.shape[0]
        return self.output(expanded, index, comp, samp, t0)
