"""Untrusted inputs never run code nor read outside their own file or folder, through the CLI.

A `.pt2` policy carrying a pickle that writes a marker file when unpickled; HDF5 cameras stored
in another file (external storage, an external link, a virtual dataset); LeRobot metadata whose
camera key or path templates lead outside the dataset; and a local Ray instance started with
its dashboard, usage reporting and metrics export off.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from PIL import Image

from perception_gap import cli
from perception_gap.catalog import Catalog
from perception_gap.encoders.policy import weights_only_loads

KEY = "agentview_image"
REPO = Path(__file__).resolve().parents[1]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_exit_2(code: int, err: str) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)


# --- .pt2 policies ------------------------------------------------------------------------------


class Mean(torch.nn.Module):
    def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        return torch.cat([images.mean(dim=(2, 3)), proprio], dim=1)


class Touch:
    """Unpickling this creates the file `path` (what any code run by a pickle could do)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture(scope="module")
def policy_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("pt2")
    lines = ["set,domain,rgb,pair_key,proprio"]
    rng = np.random.default_rng(0)
    for i in range(4):
        img = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
        for dom in ("sim", "real"):
            Image.fromarray(img).save(root / f"{dom}{i}.png")
            lines.append(f'{dom},{dom},{dom}{i}.png,p{i},"[{i * 0.1}]"')
    (root / "m.csv").write_text("\n".join(lines) + "\n")
    db = str(root / "c.duckdb")
    assert cli.main(["index", "--manifest", str(root / "m.csv"), "--db", db, "-q"]) == 0
    program = torch.export.export(Mean(), (torch.zeros(4, 3, 8, 10), torch.zeros(4, 1)))
    torch.export.save(program, str(root / "mean.pt2"))
    return root, db


def _replace_member(src: Path, dst: Path, suffix: str, payload: bytes) -> None:
    """Copy the zip `src` to `dst` with the member whose name ends with `suffix` replaced by `payload`
    (added under the archive's folder when there is none)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        names = zin.namelist()
        hit = [n for n in names if n.endswith(suffix)]
        for n in names:
            zout.writestr(n, payload if n in hit else zin.read(n))
        if not hit:
            zout.writestr(names[0].split("/", 1)[0] + "/" + suffix, payload)


def _torch_pickle(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.parametrize("member, payload", [
    ("data/sample_inputs/model.pt", "torch"),  # read with a full-unpickler retry by torch.export.load
    ("data/sample_inputs/model.pt", "raw"),  # a bare pickle, not torch.save's zip
    ("data/constants/opaque_obj_0", "raw"),  # a member torch.export.load reads with pickle.loads
])
def test_a_pickle_inside_a_pt2_policy_is_never_run(policy_world, tmp_path, capfd, member, payload):
    root, db = policy_world
    marker = tmp_path / "pwned"
    evil = Touch(str(marker))
    data = _torch_pickle(evil) if payload == "torch" else pickle.dumps(evil, protocol=2)
    bad = tmp_path / "evil.pt2"
    _replace_member(root / "mean.pt2", bad, member, data)
    code, _, err = run(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy", str(bad), "-q"], capfd)
    assert not marker.exists()
    one_line_exit_2(code, err)
    assert "pt2" in err


def test_the_pickle_does_run_under_a_plain_torch_export_load(policy_world, tmp_path):
    """The hole the guard closes exists: the same archive runs the pickle without the guard."""
    root, _ = policy_world
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pt2"
    _replace_member(root / "mean.pt2", bad, "data/sample_inputs/model.pt", _torch_pickle(Touch(str(marker))))
    with weights_only_loads():
        with pytest.raises(Exception):
            torch.export.load(str(bad))
    assert not marker.exists()
    try:
        torch.export.load(str(bad))
    except Exception:  # noqa: BLE001 - what the unpickled object does next does not matter here
        pass
    assert marker.exists()


def test_an_untouched_pt2_policy_still_loads_and_runs(policy_world, tmp_path, capsys):
    root, db = policy_world
    js = tmp_path / "r.json"
    code, _, err = run(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                        str(root / "mean.pt2"), "--json", str(js), "-q"], capsys)
    assert code == 0, err
    assert json.loads(js.read_text())["policy_check"]["n_pairs"] == 4


# --- HDF5: values stored outside the file -------------------------------------------------------


class OpenSpy:
    """A FIFO that records whether anything opened it: a writer thread blocks in open() until a
    reader comes (then it sets `opened`); `close` releases the thread without counting itself."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path, self.opened, self._releasing = path, threading.Event(), False
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        with open(self.path, "wb"):
            if not self._releasing:
                self.opened.set()

    def close(self) -> None:
        self._releasing = True
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self._thread.join(5)
        os.close(fd)


def _robomimic(path: Path, n_demos: int = 1, frames: int = 3) -> Path:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for d in range(n_demos):
            g = f.create_group(f"data/demo_{d}")
            g.create_dataset(f"obs/{KEY}", data=rng.integers(0, 256, (frames, 8, 10, 3), dtype=np.uint8))
            g.create_dataset("obs/eef_pos", data=np.zeros((frames, 3)))
            g.create_dataset("actions", data=np.zeros((frames, 7)))
    return path


def test_hdf5_cameras_stored_outside_the_file_are_recorded_skips_never_read(tmp_path, capsys):
    spy = OpenSpy(tmp_path / "outside")
    try:
        h5 = _robomimic(tmp_path / "demo.hdf5")
        passwd = os.path.getsize("/etc/passwd") // 48
        with h5py.File(h5, "a") as f:
            d = f["data"]
            d.create_dataset(f"demo_1/obs/{KEY}", shape=(passwd, 4, 4, 3), dtype=np.uint8,
                             external=[("/etc/passwd", 0, passwd * 48)])
            d.create_dataset(f"demo_2/obs/{KEY}", shape=(3, 8, 10, 3), dtype=np.uint8,
                             external=[(str(spy.path), 0, 3 * 240)])
            d.create_group("demo_3/obs")[KEY] = h5py.ExternalLink(str(spy.path), "/cam")
            d["demo_4"] = h5py.ExternalLink(str(spy.path), "/")
            layout = h5py.VirtualLayout(shape=(3, 8, 10, 3), dtype=np.uint8)
            layout[:] = h5py.VirtualSource(str(spy.path), "cam", shape=(3, 8, 10, 3))
            d.create_group("demo_5/obs").create_virtual_dataset(KEY, layout)
            d.create_dataset(f"demo_6/obs/{KEY}", data=np.zeros((3, 8, 10, 3), np.uint8))
            d["demo_6/actions"] = h5py.ExternalLink(str(spy.path), "/actions")  # a demo's actions elsewhere
            d.create_dataset(f"demo_7/obs/{KEY}", data=np.zeros((3, 8, 10, 3), np.uint8))
            d["demo_7/obs/eef_pos"] = h5py.ExternalLink(str(spy.path), "/eef")  # its proprio elsewhere
        db = str(tmp_path / "c.duckdb")
        for name in ("sim", "real"):
            code, out, err = run(["index", "--hdf5", str(h5), "--camera", KEY, "--proprio", "eef_pos", "--set", name,
                                  "--domain", name, "--db", db], capsys)
            assert code == 0, err
            assert "3 usable, 7 skipped" in out, out
        assert "/etc/passwd" in out and "external link" in out and "virtual dataset" in out
        code, _, err = run(["stats", "--sim", "sim", "--real", "real", "--db", db, "-q"], capsys)
        assert code in (0, 1), err
        assert not spy.opened.is_set()
        with Catalog(db, read_only=True) as cat:
            assert cat.set_counts("sim")["ok"] == 3
            assert {r["episode"] for r in cat.load_frames("sim")} == {"0"}  # the usable frames: demo_0's only
    finally:
        spy.close()


def test_the_spy_sees_a_read_through_an_external_link(tmp_path):
    """The spy can fail: following the external link plainly opens the outside file."""
    spy = OpenSpy(tmp_path / "outside")
    try:
        with h5py.File(tmp_path / "x.hdf5", "w") as f:
            f["link"] = h5py.ExternalLink(str(spy.path), "/")
        with h5py.File(tmp_path / "x.hdf5", "r") as f:
            with pytest.raises(Exception):
                f["link"]
        assert spy.opened.wait(5)
    finally:
        spy.close()


# --- LeRobot: metadata pointing outside the dataset ---------------------------------------------

CAM = "observation.images.top"


def _lerobot(tmp_path: Path) -> Path:
    from tests.robot_data import smooth_frames, write_lerobot

    return write_lerobot(tmp_path / "ds", [smooth_frames(3, seed=0), smooth_frames(2, seed=1)], version="v2.1")


def _edit_info(root: Path, **changes) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    info.update(changes)
    (root / "meta/info.json").write_text(json.dumps(info))


@pytest.mark.parametrize("case", ["camera_key", "abs_video_path", "abs_data_path", "dotdot_data_path",
                                  "attribute_field"])
def test_lerobot_metadata_never_leads_a_read_outside_the_dataset(tmp_path, capsys, case):
    root = _lerobot(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    spies = []
    info = json.loads((root / "meta/info.json").read_text())
    camera = CAM
    if case == "camera_key":  # video_path puts the key in a folder name: ../../../outside/cam
        camera = "../../../outside/cam"
        info["features"][camera] = dict(info["features"][CAM])
        (outside / "cam").mkdir()
        spies += [OpenSpy(outside / "cam" / f"episode_{i:06d}.mp4") for i in range(2)]
    elif case == "abs_video_path":
        info["video_path"] = str(outside) + "/{video_key}_{episode_index}.mp4"
        spies += [OpenSpy(outside / f"{CAM}_{i}.mp4") for i in range(2)]
    elif case == "abs_data_path":
        info["data_path"] = str(outside) + "/{episode_index}.parquet"
        spies += [OpenSpy(outside / f"{i}.parquet") for i in range(2)]
    elif case == "dotdot_data_path":
        info["data_path"] = "data/../../outside/{episode_index}.parquet"
        spies += [OpenSpy(outside / f"{i}.parquet") for i in range(2)]
    else:
        info["data_path"] = "data/{episode_index.__class__}.parquet"
    (root / "meta/info.json").write_text(json.dumps(info))
    try:
        code, _, err = run(["index", "--lerobot", str(root), "--camera", camera, "--set", "s", "--domain", "real",
                            "--db", str(tmp_path / "c.duckdb")], capsys)
        one_line_exit_2(code, err)
        assert ("inside the dataset folder" in err) if case != "attribute_field" else ("data_path" in err)
        assert not any(s.opened.is_set() for s in spies)
    finally:
        for s in spies:
            s.close()


# --- a local Ray instance ------------------------------------------------------------------------

_ADDR = re.compile(r'sin_addr=inet_addr\("([0-9.]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def _ray_sets(tmp_path: Path) -> str:
    db = str(tmp_path / "c.duckdb")
    rng = np.random.default_rng(0)
    for dom in ("sim", "real"):
        (tmp_path / dom).mkdir()
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(tmp_path / dom / f"f{i}.png")
        assert cli.main(["index", str(tmp_path / dom), "--set", dom, "--domain", dom, "--db", db, "-q"]) == 0
    return db


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to watch connections")
def test_a_local_ray_engine_connects_to_nothing_off_this_machine(tmp_path):
    pytest.importorskip("ray.data")
    db = _ray_sets(tmp_path)
    trace = tmp_path / "trace"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # --seccomp-bpf: only the traced call stops a process, not every system call of Ray's processes
    p = subprocess.run(["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect", "-e", "signal=none",
                        "-o", str(trace), sys.executable, str(REPO / "cli.py"), "stats", "--sim", "sim",
                        "--real", "real", "--db", db, "--engine", "ray", "--workers", "1", "-q"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert p.returncode in (0, 1), p.stderr
    text = trace.read_text()
    assert "default_worker" in text or "connect(" in text  # the trace saw Ray's processes
    seen = {a or b for a, b in _ADDR.findall(text)}
    outside = {a for a in seen if a not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")}
    assert seen and not outside, outside
    with Catalog(db, read_only=True) as cat:
        assert cat.con.execute("SELECT count(*) FROM frame_stats").fetchone()[0] == 6  # Ray's tasks did the work


def test_ray_failing_to_start_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance of this process is running")
    db = _ray_sets(tmp_path)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "absent" / "ray"))
    (tmp_path / "absent").write_text("a file where Ray wants a folder")
    from perception_gap.engines.ray_engine import LOCAL_ENV

    before = {k: os.environ.get(k) for k in LOCAL_ENV}
    code, _, err = run(["stats", "--sim", "sim", "--real", "real", "--db", db, "--engine", "ray", "-q"], capsys)
    one_line_exit_2(code, err)
    assert "Cannot start a local Ray instance" in err
    assert {k: os.environ.get(k) for k in LOCAL_ENV} == before  # the settings for Ray's processes are not left here
