"""Sharded-embedding load on real PyTorch ranks (4, gloo, CPU) under
`stepscope run`: examples/embedding_train.py shards a table by rows over
the ranks, looks up Zipf-distributed ids over all_to_all_single, and
records stepscope.shard_load.  A table whose popular rows sit in one
shard is named by embedding_imbalance with the table, the shard's rank
and the share it served; with the popular rows dealt to the shards in
turn (the example's default) there is no finding.
"""
import importlib.util

import pytest

from conftest import SOURCE
from test_ddp import ddp_env, python_cmd
from jobs import run_job

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

EXAMPLE = SOURCE / "examples" / "embedding_train.py"
STEPS = 25
TIMEOUT = 300


def run_example(db, *args):
    job = run_job(db, 4, python_cmd(EXAMPLE, "--steps", str(STEPS), *args),
                  env=ddp_env(), timeout=TIMEOUT)
    assert job.returncode == 0, job.stderr
    return job.report()


@pytest.mark.parametrize("hot", [2, 1])
def test_the_hot_shard_and_its_rank_are_named(tmp_path, hot):
    report = run_example(tmp_path / "store.db", "--hot-shard", str(hot))
    found = [f for f in report["findings"] if f["kind"] == "embedding_imbalance"]
    assert len(found) == 1, report["findings"]
    f, = found
    ev = f["evidence"]
    assert ev["table"] == "items" and ev["hot_shard"] == hot, f
    assert f["ranks"] == [hot] and ev["rank"] == hot, f
    # the rows of one shard of four hold 87 % of the Zipf mass
    assert 80 < ev["share_pct"] < 95, f
    assert ev["max_mean"] > 3 and ev["tvd"] > 0.5, f
    assert f"shard {hot} (rank {hot}) served" in f["message"]


def test_spread_rows_make_no_finding(tmp_path):
    report = run_example(tmp_path / "store.db")
    assert report["findings"] == [], report["findings"]
