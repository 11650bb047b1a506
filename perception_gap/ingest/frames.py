"""Reading frames from disk: cheap header probes for the catalog, full decodes for statistics.

Every failure becomes a `FrameError` whose message is the skip reason recorded in the catalog.
Nothing is rescaled: 16-bit images stay uint16, observation arrays keep their dtype and values.
"""

from __future__ import annotations

import io
import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from perception_gap.errors import FrameError

IMAGE_EXTS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pfm"})
ARRAY_EXTS = frozenset({".npy"})
EXR_EXTS = frozenset({".exr"})
RGB_EXTS = IMAGE_EXTS | ARRAY_EXTS
DEPTH_EXTS = frozenset({".png", ".npy", ".exr", ".tif", ".tiff", ".pgm", ".pfm"})

# Pillow's own default (~89 Mpx) warns, twice that raises; a camera frame is far smaller, so a
# header claiming more is a decompression bomb or a corrupt file. Refuse it before decoding.
MAX_PIXELS = 64_000_000
EXIF_ORIENTATION_TAG = 0x0112


@dataclass(frozen=True)
class Header:
    """What the catalog records without decoding pixels.

    Attributes:
        width, height: pixels, after EXIF orientation (rotations by 90 degrees swap them).
        format: `PNG`, `JPEG`, ..., `NPY` or `EXR`.
        mode: Pillow mode (`RGB`, `L`, `I;16`, ...) or the array layout (`HWC`, `CHW`, `HW`).
        dtype: numpy dtype name of the decoded values (`uint8`, `uint16`, `float32`, ...).
        channels: number of channels.
        exif_orientation: EXIF orientation tag (1 = as stored), None when absent.
    """

    width: int
    height: int
    format: str
    mode: str
    dtype: str
    channels: int
    exif_orientation: int | None = None


_MODE_INFO = {  # Pillow mode -> (dtype of decoded values, channels)
    "1": ("uint8", 1), "L": ("uint8", 1), "P": ("uint8", 3), "RGB": ("uint8", 3),
    "RGBA": ("uint8", 4), "CMYK": ("uint8", 3), "LA": ("uint8", 2), "PA": ("uint8", 4),
    "YCbCr": ("uint8", 3), "LAB": ("uint8", 3), "HSV": ("uint8", 3), "RGBX": ("uint8", 3),
    "I;16": ("uint16", 1), "I;16B": ("uint16", 1), "I;16L": ("uint16", 1),
    "I": ("int32", 1), "F": ("float32", 1),
}


def _check_size(w: int, h: int) -> None:
    if w <= 0 or h <= 0:
        raise FrameError(f"empty image ({w}x{h})")
    if w * h > MAX_PIXELS:
        raise FrameError(f"image too large ({w}x{h} = {w * h} pixels > {MAX_PIXELS}): possible decompression bomb")


def _open_image(src: bytes | Path) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(src) if isinstance(src, bytes) else src)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise FrameError(f"decompression bomb refused: {e}") from None
    except Image.UnidentifiedImageError:
        raise FrameError("not a readable image: no known image format in the file's content") from None
    except Exception as e:  # Pillow raises many types for unreadable input
        raise FrameError(f"not a readable image: {type(e).__name__}: {e}".rstrip(": ")) from None


def _orientation(img: Image.Image) -> int | None:
    """EXIF orientation without decoding pixels.

    For PNG, Pillow's `getexif()` loads the whole image to look for a trailing eXIf chunk, so
    only an eXIf chunk seen while reading the header (the usual place) is used there.
    """
    try:
        if img.format == "PNG":
            raw = img.info.get("exif")
            if not raw:
                return None
            exif = Image.Exif()
            exif.load(raw)
            return exif.get(EXIF_ORIENTATION_TAG)
        if img.format in ("JPEG", "MPO", "WEBP") and not img.info.get("exif"):
            return None  # no APP1/EXIF block: skip the parser (most camera pipelines' frames)
        if img.format in ("JPEG", "TIFF", "WEBP", "MPO"):
            return img.getexif().get(EXIF_ORIENTATION_TAG)
    except Exception:
        return None
    return None


def _is_png16(img: Image.Image) -> bool:
    """A 48/64-bit PNG: Pillow would decode it to 8 bits (its raw mode says `;16`)."""
    if img.format != "PNG" or img.mode not in ("RGB", "RGBA") or not img.tile:
        return False
    args = img.tile[0][3]
    raw = args[0] if isinstance(args, tuple) else args
    return isinstance(raw, str) and ";16" in raw


def _header_of(img: Image.Image) -> Header:
    w, h = img.size
    _check_size(w, h)
    orientation = _orientation(img)
    if orientation in (5, 6, 7, 8):
        w, h = h, w
    dtype, channels = _MODE_INFO.get(img.mode, ("uint8", len(img.getbands())))
    if _is_png16(img):
        dtype = "uint16"  # Pillow reads 48/64-bit PNG as 8-bit; we decode it ourselves
    return Header(width=w, height=h, format=img.format or "unknown", mode=img.mode,
                  dtype=dtype, channels=channels, exif_orientation=orientation)


def probe_image(data: bytes) -> Header:
    """Header of an image file's bytes without decoding its pixels."""
    if not data:
        raise FrameError("zero-byte file")
    return _header_of(_open_image(data))


def _npy_header(data: bytes) -> tuple[tuple[int, ...], np.dtype, bool]:
    try:
        f = io.BytesIO(data)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except Exception as e:
        raise FrameError(f"not a valid .npy array: {e}") from None
    return tuple(shape), np.dtype(dtype), bool(fortran)


def array_layout(shape: tuple[int, ...]) -> str:
    """`HW`, `HWC` or `CHW` for an observation array's shape; raises FrameError otherwise.

    A 3-D array is CHW when its first axis has 1, 3 or 4 entries and its last does not.
    """
    if len(shape) == 2:
        layout = "HW"
    elif len(shape) == 3:
        if shape[-1] in (1, 3, 4):
            layout = "HWC"
        elif shape[0] in (1, 3, 4):
            layout = "CHW"
        else:
            raise FrameError(f"cannot tell the channel axis of array shape {shape} (expected 1, 3 or 4 channels first or last)")
    else:
        raise FrameError(f"expected a 2-D or 3-D array, got shape {shape}")
    if any(s == 0 for s in shape):
        raise FrameError(f"empty array (shape {shape})")
    return layout


def probe_npy(data: bytes) -> Header:
    """Header of a `.npy` observation array without loading its values."""
    if not data:
        raise FrameError("zero-byte file")
    shape, dtype, _ = _npy_header(data)
    if dtype.hasobject or not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
                               or dtype == np.bool_):
        raise FrameError(f"unsupported array dtype {dtype} (expected a real-valued integer, float or bool array)")
    layout = array_layout(shape)
    if layout == "HW":
        h, w, c = shape[0], shape[1], 1
    elif layout == "HWC":
        h, w, c = shape
    else:
        c, h, w = shape
    _check_size(w, h)
    return Header(width=w, height=h, format="NPY", mode=layout, dtype=dtype.name, channels=c)


def probe_exr(path: Path) -> Header:
    """Header of an OpenEXR file (depth maps)."""
    import OpenEXR

    try:
        # the header's values are read while the file is open: the mapping is empty once it closes
        with OpenEXR.File(str(path), header_only=True) as f:
            hdr = f.header()
            (x0, y0), (x1, y1) = hdr["dataWindow"]
            n_channels = len(hdr.get("channels", []))
    except Exception as e:
        raise FrameError(f"not a readable EXR file: {type(e).__name__}: {e}") from None
    w, h = int(x1 - x0 + 1), int(y1 - y0 + 1)
    _check_size(w, h)
    return Header(width=w, height=h, format="EXR", mode="EXR", dtype="float32", channels=n_channels or 1)


def probe(path: Path, data: bytes) -> Header:
    """Header of any supported frame file from its bytes (EXR is read from `path`)."""
    ext = path.suffix.lower()
    if ext in ARRAY_EXTS:
        return probe_npy(data)
    if ext in EXR_EXTS:
        if not data:
            raise FrameError("zero-byte file")
        return probe_exr(path)
    if ext in IMAGE_EXTS:
        return probe_image(data)
    raise FrameError(f"unsupported file type {ext or '(none)'!r}")


def _load_npy(data: bytes) -> np.ndarray:
    probe_npy(data)
    try:
        a = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as e:
        raise FrameError(f"truncated or unreadable .npy array: {e}") from None
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    return a


def _to_hwc(a: np.ndarray) -> np.ndarray:
    layout = array_layout(a.shape)
    if layout == "CHW":
        return np.ascontiguousarray(np.moveaxis(a, 0, -1))
    return a


def _decode_png16(data: bytes) -> np.ndarray:
    """48/64-bit PNG -> (H, W, C) uint16, which Pillow would truncate to 8 bits."""
    import png

    try:
        w, h, rows, info = png.Reader(bytes=data).asDirect()
        a = np.vstack([np.asarray(r, dtype=np.uint16) for r in rows])
    except Exception as e:
        raise FrameError(f"truncated or corrupt 16-bit PNG: {e}") from None
    planes = info["planes"]
    return a.reshape(h, w, planes)


def decode_rgb(path: Path, data: bytes | None = None) -> Image.Image | np.ndarray:
    """Decode an RGB frame for statistics.

    Returns:
        An 8-bit Pillow image of mode `L` or `RGB` (EXIF orientation applied; palette, CMYK and
        alpha converted/dropped) or, for 16-bit, 32-bit and float data and `.npy` arrays, an
        (H, W, C) numpy array with the file's own dtype and values.
    """
    ext = path.suffix.lower()
    if ext in ARRAY_EXTS:
        return _to_hwc(_load_npy(read_bytes(path) if data is None else data))
    if ext not in IMAGE_EXTS:
        raise FrameError(f"unsupported file type {ext or '(none)'!r}")
    if data is None:
        data = read_bytes(path)  # only regular files: never a device or a FIFO
    if not data:
        raise FrameError("zero-byte file")
    img = _open_image(data)
    header = _header_of(img)
    if header.dtype == "uint16" and header.channels >= 3:
        return _decode_png16(data)
    try:
        img.load()
        if header.exif_orientation not in (None, 1):
            img = ImageOps.exif_transpose(img)
    except Exception as e:
        raise FrameError(f"truncated or corrupt image: {type(e).__name__}: {e}") from None
    mode = img.mode
    if mode in ("L", "RGB"):
        return img
    if mode in ("1", "LA"):
        return img.convert("L")
    if mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.asarray(img)
        if mode.startswith("I;16"):
            a = a.astype(np.uint16, copy=False)
        return a[:, :, None]
    return img.convert("RGB")  # P, PA, RGBA, CMYK, YCbCr, ...: drop alpha, map to RGB


def decode_depth(path: Path, data: bytes | None = None) -> np.ndarray:
    """Decode a depth map as an (H, W) array in the file's own units and dtype."""
    ext = path.suffix.lower()
    if data is None:
        data = read_bytes(path)  # only regular files (EXR too, though OpenEXR re-reads it by path)
    if ext in EXR_EXTS:
        return _decode_exr(path)
    if ext in ARRAY_EXTS:
        a = _load_npy(data)
        if a.ndim == 3:
            a = _to_hwc(a)[..., 0]
        if a.ndim != 2:
            raise FrameError(f"expected a 2-D depth array, got shape {a.shape}")
        return a
    if ext not in DEPTH_EXTS:
        raise FrameError(f"unsupported depth file type {ext!r}")
    if not data:
        raise FrameError("zero-byte file")
    img = _open_image(data)
    header = _header_of(img)
    try:
        img.load()
    except Exception as e:
        raise FrameError(f"truncated or corrupt depth image: {type(e).__name__}: {e}") from None
    if header.channels != 1:
        raise FrameError(f"expected a single-channel depth image, got mode {img.mode}")
    a = np.asarray(img)
    if img.mode.startswith("I;16"):
        a = a.astype(np.uint16, copy=False)
    return a


def _decode_exr(path: Path) -> np.ndarray:
    import OpenEXR

    try:
        with OpenEXR.File(str(path)) as f:
            channels = f.channels()
            for name in ("Z", "Y", "depth", "R", "RGB", "RGBA"):
                if name in channels:
                    px = np.asarray(channels[name].pixels)
                    break
            else:
                px = np.asarray(next(iter(channels.values())).pixels)
    except FrameError:
        raise
    except Exception as e:
        raise FrameError(f"truncated or unreadable EXR file: {e}") from None
    if px.ndim == 3:
        px = px[..., 0]
    return px.astype(np.float32, copy=False)


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "a special file")


def _not_regular(mode: int) -> str | None:
    """Why a file of this st_mode is not read (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return "is a directory, not a file" if stat.S_ISDIR(mode) else f"is {_kind(mode)}, not a regular file"


def _stat_problem(path: Path) -> tuple[int | None, str | None]:
    """(st_mode following links, None) or (None, why the path cannot be looked at)."""
    try:
        return os.stat(path).st_mode, None
    except FileNotFoundError:
        return None, ("not found: a symbolic link to nothing" if os.path.islink(path) else "not found")
    except PermissionError:
        return None, "permission denied"
    except OSError as e:
        return None, f"cannot look at it: {e.strerror or e}"


def not_a_file(path: str | os.PathLike[str]) -> str | None:
    """Why `path` is not a readable regular file, in words for an error message ("not found", "is a
    FIFO (named pipe), not a regular file", ...); None when it is one. Reads nothing."""
    mode, why = _stat_problem(Path(path))
    return why if mode is None else _not_regular(mode)


def not_a_folder(path: str | os.PathLike[str]) -> str | None:
    """Why `path` is not a folder ("not found", "is a regular file, not a folder", "is a character
    device, not a folder", ...); None when it is one."""
    mode, why = _stat_problem(Path(path))
    return why if mode is None else None if stat.S_ISDIR(mode) else f"is {_kind(mode)}, not a folder"


def open_regular(path: Path) -> int:
    """Open a regular file for reading; anything else (device, FIFO, socket, folder) is refused.

    The resolved path is checked before opening, and the opened descriptor again (the file
    could be swapped in between): opening is non-blocking, so a FIFO with no writer never hangs
    the caller, and `/dev/zero` behind a symlink is never read.

    Returns:
        An open file descriptor (the caller closes it).

    Raises:
        FrameError: not a regular file, not found, permission denied or another OS error.
    """
    try:
        why = _not_regular(os.stat(path).st_mode)
        if why is not None:
            raise FrameError(why)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FrameError("file not found") from None
    except PermissionError:
        raise FrameError("permission denied") from None
    except OSError as e:
        raise FrameError(f"cannot read file: {e.strerror or e}") from None
    why = _not_regular(os.fstat(fd).st_mode)
    if why is not None:
        os.close(fd)
        raise FrameError(why)
    return fd


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, or FrameError naming why it cannot be read (see `open_regular`)."""
    fd = open_regular(path)
    try:
        with open(fd, "rb", closefd=True) as f:
            return f.read()
    except OSError as e:
        raise FrameError(f"cannot read file: {e.strerror or e}") from None
