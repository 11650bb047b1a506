"""Torch files that declare more than they hold: refused in one line before any loader allocates.

A zip member's uncompressed size and a pickled storage's element count are what torch sizes its
buffers from; the files here are built to lie about them (a 3 MB archive whose pickle inflates
to 3 GiB, a legacy file declaring a 3 GiB storage over 16 bytes of data). The memory cases run
the CLI in a child process, each command capped at 1.5 GiB of address space beyond what the
process held when it began.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

from perception_gap.cli import main  # noqa: E402
from perception_gap.encoders.archives import MAX_EXPANSION, check_declared_sizes, declared_limit  # noqa: E402
from perception_gap.encoders.checkpoints import load_weights_only  # noqa: E402
from perception_gap.encoders.errors import ArchiveLimitError, EncoderError  # noqa: E402

BOMB_BYTES = 3 * 2**30
HEADROOM = 3 * 2**29  # address space each capped command may add to the process
_CHUNK = 2**24


def _crc32_of_zeros(n: int) -> int:
    """zlib.crc32(bytes(n)) without reading n bytes: appending one zero byte maps a CRC register v
    to L(v) ^ c, affine over GF(2), so n bytes are that map composed n times (by squaring)."""

    def apply(m: tuple[list[int], int], v: int) -> int:
        cols, out = m
        for i in range(32):
            if v >> i & 1:
                out ^= cols[i]
        return out

    def then(f: tuple[list[int], int], g: tuple[list[int], int]) -> tuple[list[int], int]:
        return [apply((f[0], 0), c) for c in g[0]], apply(f, g[1])

    c = zlib.crc32(b"\0", 0)
    step = ([zlib.crc32(b"\0", 1 << i) ^ c for i in range(32)], c)
    acc: tuple[list[int], int] = ([1 << i for i in range(32)], 0)
    while n:
        if n & 1:
            acc = then(step, acc)
        step, n = then(step, step), n >> 1
    return acc[1]


def _deflated_zeros(n: int) -> tuple[bytes, int]:
    """A raw deflate stream of `n` zero bytes and their CRC-32: one compressed chunk, full-flushed so
    it stands alone, repeated (a few MB for gigabytes)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(_CHUNK)) + c.flush(zlib.Z_FULL_FLUSH)
    reps, rest = divmod(n, _CHUNK)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    return block * reps + last.compress(bytes(rest)) + last.flush(zlib.Z_FINISH), _crc32_of_zeros(n)


def _write_zip(path: Path, members: list[tuple[str, bytes, int, int]]) -> Path:
    """A zip of deflated members (name, raw deflate stream, CRC-32, uncompressed size), written by
    hand so a member may inflate to more than this process could hold."""
    out, central = io.BytesIO(), io.BytesIO()
    for name, stream, crc, size in members:
        offset, encoded = out.tell(), name.encode()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(stream), size,
                              len(encoded), 0) + encoded + stream)
        central.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(stream),
                                  size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded)
    cd = central.getvalue()
    start = out.tell()
    out.write(cd + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(cd), start, 0))
    path.write_bytes(out.getvalue())
    return path


def _small(name: str, data: bytes) -> tuple[str, bytes, int, int]:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return name, c.compress(data) + c.flush(), zlib.crc32(data), len(data)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A catalog with a sim and a real set of two paired frames."""
    root = tmp_path_factory.mktemp("archives")
    rng = np.random.default_rng(0)
    lines = ["set,domain,rgb,pair_key"]
    for dom in ("sim", "real"):
        (root / dom).mkdir()
        for i in range(2):
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(root / dom / f"f{i}.png")
            lines.append(f"{dom},{dom},{dom}/f{i}.png,f{i}")
    (root / "m.csv").write_text("\n".join(lines) + "\n")
    db = str(root / "c.duckdb")
    assert main(["index", "--manifest", str(root / "m.csv"), "--db", db, "-q"]) == 0
    return root, db


def _commands(kind: str, path: Path, db: str) -> list[str]:
    return {
        "fid_weights": ["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--inception-weights",
                        str(path), "--out", str(path.parent / "out"), "--db", db, "-q", "--device", "cpu"],
        "encoder_checkpoint": ["embed", "--encoder", f"open_clip:ViT-B-32:{path}", "--set", "sim", "--db", db, "-q"],
        "policy": ["policy-check", "--policy", str(path), "--sim", "sim", "--real", "real", "--db", db, "-q"],
    }[kind]


# One child process runs every capped command in turn, so the imports are paid once. Before each
# command its address-space limit is set to what the process holds then plus HEADROOM, and its
# file descriptor 2 goes to a file of its own: each command's exit code and stderr are what
# `perception-gap ARGV` alone would give under that cap.
_CHILD = r"""
import json, os, resource, sys, traceback
import numpy, torch, duckdb, pyarrow.parquet  # noqa: F401 - mapped before any cap
from perception_gap import cli

def vm_size():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))

headroom, folder, commands = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
codes = {}
for name, argv in commands.items():
    with open(os.path.join(folder, name + ".err"), "w") as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        resource.setrlimit(resource.RLIMIT_AS, (vm_size() + headroom, hard))
        try:
            codes[name] = cli.main(argv)
        except SystemExit as e:
            codes[name] = e.code
        except BaseException:
            traceback.print_exc()
            codes[name] = 1
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
with open(os.path.join(folder, "codes.json"), "w") as f:
    json.dump(codes, f)
"""


def _legacy_bomb(path: Path) -> Path:
    """A legacy torch file whose pickle declares 3 * 2**28 float32 elements (3 GiB) over 16 bytes of data."""
    torch.save({"w": torch.zeros(4)}, path, _use_new_zipfile_serialization=False)
    raw = path.read_bytes()
    # the element count sits in the pickle as BININT1 4 right after the location 'cpu'
    at = raw.index(b"cpu")
    i = raw.index(b"K\x04", at)
    path.write_bytes(raw[:i] + b"J" + struct.pack("<i", 3 * 2**28) + raw[i + 2:])
    return path


@pytest.fixture(scope="module")
def capped(world, tmp_path_factory) -> dict[str, tuple[Path, int, str]]:
    """Each bomb through its command in the capped child: {case: (file, exit code, stderr)}.
    `zip_*` cases: a 3 MB zip whose pickle member inflates to 3 GiB; `legacy`: `_legacy_bomb`."""
    root = tmp_path_factory.mktemp("bombs")
    stream, crc = _deflated_zeros(BOMB_BYTES)
    kinds = ["fid_weights", "policy"]
    try:
        import open_clip  # noqa: F401
        kinds.append("encoder_checkpoint")
    except ImportError:
        pass
    files, commands = {}, {}
    for kind in kinds:
        (root / kind).mkdir()
        name = "constants.pkl" if kind == "policy" else "data.pkl"
        files[f"zip_{kind}"] = _write_zip(root / kind / ("bomb.pt" if kind == "policy" else "bomb.pth"),
                                          [_small("bomb/version", b"3\n"), ("bomb/" + name, stream, crc, BOMB_BYTES)])
        commands[f"zip_{kind}"] = _commands(kind, files[f"zip_{kind}"], world[1])
    (root / "legacy").mkdir()
    files["legacy"] = _legacy_bomb(root / "legacy" / "legacy.pth")
    commands["legacy"] = _commands("fid_weights", files["legacy"], world[1])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(HEADROOM), str(root), json.dumps(commands)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
    codes = json.loads((root / "codes.json").read_text())
    return {case: (files[case], codes[case], (root / f"{case}.err").read_text()) for case in commands}


def test_the_zero_stream_is_what_it_declares():
    """The bomb's CRC-32 is computed without reading its bytes: against zlib on sizes it can read."""
    for n in (0, 1, 1000, _CHUNK + 7):
        assert _crc32_of_zeros(n) == zlib.crc32(bytes(n)), n
    stream, crc = _deflated_zeros(3 * _CHUNK + 5)
    data = zlib.decompress(stream, -15)
    assert data == bytes(3 * _CHUNK + 5) and crc == zlib.crc32(data)


@pytest.mark.parametrize("kind", ["fid_weights", "encoder_checkpoint", "policy"])
def test_a_3mb_archive_that_inflates_to_3gib_is_refused_under_a_memory_cap(capped, kind):
    """torch.load reads `data.pkl` whole, torch.jit.load `constants.pkl`: each inflated to 3 GiB
    before any check. Now the directory's declared sizes are read first: exit 2, one line."""
    if kind == "encoder_checkpoint":
        pytest.importorskip("open_clip")
    path, code, err = capped[f"zip_{kind}"]
    assert path.stat().st_size < 4 * 2**20
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert "declares over" in lines[0] and "nothing was loaded" in lines[0] and str(path) in lines[0]


def test_a_legacy_file_declaring_3gib_over_16_bytes_is_refused_under_a_memory_cap(capped):
    """The legacy format allocates each storage at the size its pickle declares, before reading it."""
    path, code, err = capped["legacy"]
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert "declares storage" in lines[0] and f"{3 * 2**28} elements" in lines[0] and "has 4" in lines[0]


def test_a_zip_pickle_declaring_more_than_its_record_is_refused(tmp_path):
    """A storage declared larger than its `data/KEY` record would be sized from the pickle."""
    path = tmp_path / "w.pth"
    torch.save({"w": torch.zeros(4)}, path)
    good = check_declared_sizes(str(path), "checkpoint")
    assert good.fmt == "zip" and not good.deflated and good.declared_bytes >= 16
    import zipfile

    with zipfile.ZipFile(path) as z:
        members = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    pkl = next(d for n, d in members if n.endswith("data.pkl"))
    bad = pkl.replace(b"K\x04", b"J" + struct.pack("<i", 2**30), 1)
    assert bad != pkl
    _write_zip(path, [_small(n, bad if n.endswith("data.pkl") else d) for n, d in members])
    with pytest.raises(ArchiveLimitError, match=r"declares storage '0' of 4294967296 bytes but the archive holds 16"):
        load_weights_only(str(path))


def test_the_limit_is_relative_to_the_file_with_a_floor_and_a_ceiling():
    assert declared_limit(0) == 64 * 2**20
    assert declared_limit(2**30) == MAX_EXPANSION * 2**30
    assert declared_limit(2**40) == 16 * 2**30


def test_a_deflated_state_dict_loads(tmp_path):
    """A zip-compressed state dict is a valid torch file: a memory map cannot hold it, so it is
    read (within the limit) instead of being refused as "Trying to resize storage"."""
    import zipfile

    plain = tmp_path / "plain.pth"
    want = {"w": torch.arange(1000, dtype=torch.float32)}
    torch.save(want, plain)
    deflated = tmp_path / "deflated.pth"
    with zipfile.ZipFile(plain) as zi, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info.filename))
    assert check_declared_sizes(str(deflated), "checkpoint").deflated
    got = load_weights_only(str(deflated), mmap=True)
    assert torch.equal(got["w"], want["w"])


@pytest.mark.parametrize("case", ["wrong_count", "protocol_101"])
def test_torch_reasons_are_formatted(world, tmp_path, capsys, case):
    """No unformatted "expected %ld got %ld" and no bare "Invalid protocol version: 101"."""
    path = tmp_path / "w.pth"
    torch.save({"w": torch.zeros(10)}, path, _use_new_zipfile_serialization=False)
    raw = bytearray(path.read_bytes())
    if case == "wrong_count":
        i = raw.rindex(struct.pack("<q", 10))  # the element count written before the data
        raw[i:i + 8] = struct.pack("<q", 5)
    else:
        i = raw.index(b"M\xe9\x03")  # BININT2 1001, the protocol version
        raw[i:i + 3] = b"K\x65"  # BININT1 101
    path.write_bytes(bytes(raw))
    capsys.readouterr()
    code = main(["embed", "--encoder", f"fid-inception:{path}", "--set", "sim", "--db", world[1], "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "%ld" not in err and "Invalid protocol" not in err
    want = {"wrong_count": "of 10 elements but the data written for it has 5",
            "protocol_101": "protocol version 1001 after its magic number, this one gives 101"}[case]
    assert want in err


def test_a_plain_archive_is_not_refused(tmp_path):
    path = tmp_path / "w.pth"
    torch.save({"w": torch.zeros(3, 3)}, path)
    assert check_declared_sizes(str(path), "checkpoint").declared_bytes <= declared_limit(path.stat().st_size)
    with pytest.raises(EncoderError, match="directory is unreadable"):
        bad = tmp_path / "bad.pt"
        bad.write_bytes(b"PK\x03\x04" + b"\0" * 40)
        check_declared_sizes(str(bad), "`--policy`", legacy=False)
