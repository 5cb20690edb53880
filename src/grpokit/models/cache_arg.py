"""The keyword under which a decoder takes its key/value cache.

transformers 5.24 renamed the forward argument ``past_key_values`` to ``cache`` (the old name still works there,
through ``deprecate_kwarg``, with a FutureWarning until its removal in 5.40); 5.23 and older know only
``past_key_values``. Every decoder call of grpokit that passes a cache (rollout/hf.py, rollout/static_decode.py,
models/prefix.py) spells it ``**cache_arg(decoder, cache)``, so it passes the current name where the installed
transformers has it and the older one only where it has not.

Decided by feature, not by version string: the name is read off the forward signature of the decoder's class
(``deprecate_kwarg`` keeps the wrapped signature), once per class; a forward that names neither (a wrapper taking
``**kwargs``) gets what transformers' own LlamaModel takes, read once.
"""

from __future__ import annotations

import functools
import inspect

from torch import nn

CACHE = "cache"  # transformers >= 5.24
PAST_KEY_VALUES = "past_key_values"  # transformers < 5.24, deprecated from 5.24 on


def _named(forward: object) -> str | None:
    try:
        params = inspect.signature(forward).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    for name in (CACHE, PAST_KEY_VALUES):
        if name in params and params[name].kind is not inspect.Parameter.VAR_KEYWORD:
            return name
    return None


@functools.cache
def library_cache_kwarg() -> str:
    """The cache keyword of the installed transformers, as its LlamaModel.forward names it."""
    from transformers import LlamaModel

    return _named(LlamaModel.forward) or PAST_KEY_VALUES


@functools.cache
def _for_class(cls: type) -> str:
    return _named(getattr(cls, "forward", None)) or library_cache_kwarg()


def cache_kwarg(decoder: nn.Module) -> str:
    """``"cache"`` or ``"past_key_values"``: the keyword `decoder`'s forward takes its cache under."""
    return _for_class(type(decoder))


def cache_arg(decoder: nn.Module, cache: object) -> dict[str, object]:
    """``{name: cache}`` to pass as ``decoder(..., **cache_arg(decoder, cache))``."""
    return {cache_kwarg(decoder): cache}
