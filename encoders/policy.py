"""Load a frozen policy and call it: TorchScript, a `torch.export` program (`.pt2`) or `module:function`.

The policy is called as `policy(images, proprio)` with `images` a float32 torch tensor
(N, 3, H, W) and `proprio` a float32 tensor (N, D) (D may be 0), and returns (N, A) actions (a
tensor or anything numpy can read). Nothing is unpickled as Python objects: TorchScript archives
are read by `torch.jit.load` (TorchScript's own restricted loader) and `.pt2` programs by
`torch.export.load` with every `torch.load` inside it forced to the weights-only unpickler
(`torch.export.load` would otherwise retry a pickled member, such as its sample inputs, with the
full unpickler); an archive holding a plain-pickle member (an opaque-object constant, which
`torch.export.load` reads with `pickle.loads`) is refused before loading, as is a plain
`torch.save` pickle given as the policy. Before either loader runs, the archive's declared sizes
are checked against its size (`archives.check_declared_sizes`). A `module:function`
spec imports the user's own code on purpose (`pkg.mod:fn`, or `path/to/file.py:fn`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import warnings
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.encoders.archives import check_declared_sizes
from perception_gap.encoders.errors import EncoderError


class PolicyError(EncoderError):
    """A policy cannot be loaded, raised when called, or returned something that is not (N, A) actions."""


def _first_line(e: BaseException) -> str:
    """`Type: first line`, cut after its first sentence when long (torch's messages run on)."""
    text = str(e).strip().splitlines()
    line = text[0] if text else ""
    if len(line) > 160 and ". " in line[:400]:
        line = line[: line.index(". ") + 1]
    return f"{type(e).__name__}: {line.rstrip('.')}" if line else type(e).__name__


def import_function(spec: str) -> Callable[..., Any]:
    """The function named by `module:function` or `path/to/file.py:function`.

    Raises:
        PolicyError: the module cannot be imported or has no such function.
    """
    module, _, name = spec.rpartition(":")
    try:
        if module.endswith(".py"):
            from perception_gap.encoders.base import not_a_file  # a file-kind word for the message

            why = not_a_file(module)
            if why is not None:
                raise PolicyError(f"Expected `--policy` {spec!r} to name an existing file, got {module!r} ({why}).")
            loader = importlib.util.spec_from_file_location(f"_policy_{abs(hash(module))}", module)
            mod = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(mod)
        else:
            sys.path.insert(0, os.getcwd())  # `module:function` as the user would import it from here
            try:
                mod = importlib.import_module(module)
            finally:
                sys.path.remove(os.getcwd())
    except PolicyError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's module failing to import is bad input
        raise PolicyError(f"Cannot import policy module {module!r}: {_first_line(e)}.") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise PolicyError(f"Expected `--policy` {spec!r} to name a function, got {name!r}, which is "
                          f"{'missing' if fn is None else type(fn).__name__} in {module!r}.")
    return fn


_FORCE_SAFE, _FORCE_UNSAFE = "TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"
_PLAIN_PICKLE_PREFIX = "opaque_obj_"  # constants `torch.export.load` reads with `pickle.loads`


@contextmanager
def weights_only_loads() -> Iterator[None]:
    """Every `torch.load` inside runs the weights-only unpickler, whatever `weights_only` it is
    called with (torch reads these variables on each call); the environment is restored after."""
    saved = {k: os.environ.get(k) for k in (_FORCE_SAFE, _FORCE_UNSAFE)}
    os.environ[_FORCE_SAFE] = "1"
    os.environ.pop(_FORCE_UNSAFE, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """The named loggers pass errors only (torch.export logs each failed attempt with its traceback;
    the PolicyError raised instead says why in one line)."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _plain_pickles(path: str) -> list[str]:
    """Members of a `.pt2` zip that `torch.export.load` would read with `pickle.loads` (none when
    the file is not a zip: `torch.export.load` then fails on its own)."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return []
    return [n for n in names if n.rsplit("/", 1)[-1].startswith(_PLAIN_PICKLE_PREFIX)]


def load_exported(spec: str) -> Callable[..., Any]:
    """The module of a `torch.export` program, loaded without unpickling any Python object.

    Raises:
        PolicyError: not an exported program, a member holding a plain pickle, or a pickled
            member that the weights-only unpickler refuses.
    """
    import torch

    pickles = _plain_pickles(spec)
    if pickles:
        raise PolicyError(f"Expected `--policy` {spec!r} to be a torch.export program without pickled Python "
                          f"objects, got member {pickles[0]!r} (a plain pickle; it is never loaded).")
    try:
        with weights_only_loads(), _quiet("torch.export", "torch._export"):
            return torch.export.load(spec).module()
    except Exception as e:  # noqa: BLE001 - any failure means: not an exported program (or not a safe one)
        raise PolicyError(f"Expected `--policy` {spec!r} to be a torch.export program (.pt2) whose pickled members "
                          f"hold tensors only, got {_first_line(e)}.") from None


def load_policy(spec: str) -> Callable[..., Any]:
    """The callable behind `spec`: a TorchScript file, a `.pt2` program or `module:function`.

    Raises:
        PolicyError: not found, not TorchScript / not an exported program, or not importable.
    """
    import torch

    if os.path.isfile(spec):
        # the loaders size their buffers from what the archive declares, not from the file
        check_declared_sizes(spec, "`--policy`", legacy=False)
        if spec.endswith(".pt2"):
            return load_exported(spec)
        try:
            with warnings.catch_warnings():  # torch 2.9+ marks TorchScript deprecated; still the common export
                warnings.simplefilter("ignore", FutureWarning)
                return torch.jit.load(spec, map_location="cpu")
        except Exception as e:  # noqa: BLE001 - any failure means: not TorchScript
            raise PolicyError(f"Expected `--policy` {spec!r} to be a TorchScript file (torch.jit.save), got "
                              f"{_first_line(e)}.") from None
    if ":" in spec and not spec.endswith((".pt", ".pt2", ".ts")):
        return import_function(spec)
    raise PolicyError(f"Expected `--policy` to be a TorchScript file, a .pt2 program or module:function, got {spec!r} "
                      "(no such file).")


@dataclass(frozen=True)
class PolicyCall:
    """A loaded policy, called on numpy batches."""

    policy: Callable[..., Any]
    spec: str

    def __call__(self, images: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        """(N, A) float64 actions for float32 `images` (N, 3, H, W) and `proprio` (N, D).

        Raises:
            PolicyError: the policy raised, or its output is not (N, A) finite numbers.
        """
        import torch

        n = len(images)
        try:
            with torch.no_grad():
                out = self.policy(torch.from_numpy(np.ascontiguousarray(images, np.float32)),
                                  torch.from_numpy(np.ascontiguousarray(proprio, np.float32)))
            if isinstance(out, (tuple, list)) and len(out) == 1:
                out = out[0]
            if isinstance(out, torch.Tensor):
                out = out.detach().cpu().double().numpy()
            actions = np.asarray(out, dtype=np.float64)
        except Exception as e:  # noqa: BLE001 - whatever the policy raises is reported, never a traceback
            raise PolicyError(f"The policy {self.spec!r} raised on images {tuple(images.shape)} and proprio "
                              f"{tuple(proprio.shape)}: {_first_line(e)}.") from None
        if actions.ndim != 2 or len(actions) != n:
            raise PolicyError(f"Expected the policy to return (N, A) actions with N = {n}, got shape {actions.shape}.")
        if not np.isfinite(actions).all():
            raise PolicyError(f"Expected finite actions from the policy, got {int((~np.isfinite(actions)).sum())} "
                              "NaN or infinite values.")
        return actions


def save_linear_policy(path: str, weight: np.ndarray, bias: np.ndarray) -> str:
    """Save a TorchScript policy `actions = [channel means of images, proprio] @ weight.T + bias`.

    A stand-in for a trained policy (the demo's): it reads both its inputs, so a change in the
    frames' colour or in the proprio moves its actions.

    Args:
        path: where to write the TorchScript file.
        weight: (A, 3 + D) float weights; bias: (A,).
    """
    import torch

    class LinearPolicy(torch.nn.Module):
        def __init__(self, w: torch.Tensor, b: torch.Tensor) -> None:
            super().__init__()
            self.register_buffer("w", w)
            self.register_buffer("b", b)

        def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
            x = torch.cat([images.mean(dim=(2, 3)), proprio], dim=1)
            return x @ self.w.t() + self.b

    module = LinearPolicy(torch.as_tensor(weight, dtype=torch.float32), torch.as_tensor(bias, dtype=torch.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.script(module).save(path)
    return path
