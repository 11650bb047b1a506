"""Non-finite numbers in results are written as null with their path and a reason: `dumps` itself,
and a statistic that overflows (policy actions of +-1e308). Through `cli.main`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from perception_gap import cli
from perception_gap.commands.output import dumps
from tests.cli_process import proprio_catalog


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """Six sim/real pairs of 6x8 frames with 2-d proprio, indexed from a manifest."""
    root = tmp_path_factory.mktemp("proprio")
    return root, proprio_catalog(root)


def test_dumps_writes_non_finite_numbers_as_null_and_names_them():
    text = dumps({"a": {"b": [1.0, math.nan]}, "c": np.float64(math.inf), "d": np.array([-math.inf, 2.0])})
    res = json.loads(text)
    assert res["a"]["b"] == [1.0, None] and res["c"] is None and res["d"] == [None, 2.0]
    assert [(x["path"], x["value"]) for x in res["non_finite"]] == [("a.b[1]", "nan"), ("c", "inf"), ("d[0]", "-inf")]
    assert all("null" in x["reason"] for x in res["non_finite"])
    assert "non_finite" not in json.loads(dumps({"a": 1.0}))


def test_an_overflowing_statistic_is_written_as_null_with_its_path(catalog, tmp_path):
    """Actions of +-1e308 are finite, but their spread overflows: written as null, not a crash."""
    root, db = catalog
    (tmp_path / "huge.py").write_text(
        "import torch\n"
        "def policy(images, proprio):\n"
        "    sign = torch.where(proprio[:, :1] > 0.25, 1.0, -1.0).double()\n"
        "    return torch.cat([sign * 1e308, proprio.double()], dim=1)\n")
    js = tmp_path / "r.json"
    rc = cli.main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                   f"{tmp_path / 'huge.py'}:policy", "--json", str(js), "-q"])
    assert rc == 0
    res = json.loads(js.read_text())
    assert res["policy_check"]["per_dim"][0]["sim_std"] is None
    paths = [x["path"] for x in res["non_finite"]]
    assert "policy_check.per_dim[0].sim_std" in paths and "policy_check.per_dim[0].real_std" in paths
