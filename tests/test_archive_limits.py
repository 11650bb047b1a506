"""Torch files that declare more than they hold: refused in one line before any loader allocates.

A zip member's uncompressed size and a pickled storage's element count are what torch sizes its
buffers from; the files here are built to lie about them (a 3 MB archive whose pickle inflates
to 3 GiB, a legacy file declaring a 3 GiB storage over 16 bytes of data). The memory cases run
the CLI in a child process capped at 1.5 GiB of address space beyond its imports.
"""

from __future__ import annotations

import io
import struct
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
from tests.bounded_run import run_bounded  # noqa: E402

BOMB_BYTES = 3 * 2**30
_CHUNK = 2**24


def _deflated_zeros(n: int) -> tuple[bytes, int]:
    """A raw deflate stream of `n` zero bytes and their CRC-32: one compressed chunk, full-flushed so
    it stands alone, repeated (a few MB for gigabytes)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(_CHUNK)) + c.flush(zlib.Z_FULL_FLUSH)
    reps, rest = divmod(n, _CHUNK)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = block * reps + last.compress(bytes(rest)) + last.flush(zlib.Z_FINISH)
    crc, zeros = 0, bytes(_CHUNK)
    for _ in range(reps):
        crc = zlib.crc32(zeros, crc)
    return stream, zlib.crc32(bytes(rest), crc)


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
def bomb():
    return _deflated_zeros(BOMB_BYTES)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A catalog with a sim and a real set of two paired frames."""
    root = tmp_path_factory.mktemp("archives")
    rng = np.random.default_rng(0)
    for dom in ("sim", "real"):
        (root / dom).mkdir()
        for i in range(2):
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(root / dom / f"f{i}.png")
    db = str(root / "c.duckdb")
    for dom in ("sim", "real"):
        assert main(["index", str(root / dom), "--set", dom, "--domain", dom, "--db", db, "-q"]) == 0
    return root, db


def _commands(kind: str, path: Path, db: str) -> list[str]:
    return {
        "fid_weights": ["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--inception-weights",
                        str(path), "--out", str(path.parent / "out"), "--db", db, "-q", "--device", "cpu"],
        "encoder_checkpoint": ["embed", "--encoder", f"open_clip:ViT-B-32:{path}", "--set", "sim", "--db", db, "-q"],
        "policy": ["policy-check", "--policy", str(path), "--sim", "sim", "--real", "real", "--db", db, "-q"],
    }[kind]


@pytest.mark.parametrize("kind", ["fid_weights", "encoder_checkpoint", "policy"])
def test_a_3mb_archive_that_inflates_to_3gib_is_refused_under_a_memory_cap(bomb, world, tmp_path, kind):
    """torch.load reads `data.pkl` whole, torch.jit.load `constants.pkl`: each inflated to 3 GiB
    before any check. Now the directory's declared sizes are read first: exit 2, one line."""
    stream, crc = bomb
    if kind == "encoder_checkpoint":
        pytest.importorskip("open_clip")
    name = "constants.pkl" if kind == "policy" else "data.pkl"
    path = _write_zip(tmp_path / ("bomb.pt" if kind == "policy" else "bomb.pth"),
                      [_small("bomb/version", b"3\n"), ("bomb/" + name, stream, crc, BOMB_BYTES)])
    assert path.stat().st_size < 4 * 2**20
    code, err = run_bounded(_commands(kind, path, world[1]))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert "declares over" in lines[0] and "nothing was loaded" in lines[0] and str(path) in lines[0]


def test_a_legacy_file_declaring_3gib_over_16_bytes_is_refused_under_a_memory_cap(world, tmp_path):
    """The legacy format allocates each storage at the size its pickle declares, before reading it."""
    path = tmp_path / "legacy.pth"
    torch.save({"w": torch.zeros(4)}, path, _use_new_zipfile_serialization=False)
    raw = path.read_bytes()
    # the element count sits in the pickle as BININT1 4 right after the location 'cpu'
    at = raw.index(b"cpu")
    i = raw.index(b"K\x04", at)
    path.write_bytes(raw[:i] + b"J" + struct.pack("<i", 3 * 2**28) + raw[i + 2:])
    code, err = run_bounded(_commands("fid_weights", path, world[1]))
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
