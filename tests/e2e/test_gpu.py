"""The GPUs' evidence per rank and per step, from real ranks under
`stepscope run`.

NO GPU IS READ HERE: the controller loads a TEST DOUBLE of NVML
(tests/support/fake_nvml.c, built as build/tests/libfake_nvml.so) through
STEPSCOPE_NVML_LIB, scripted by FAKE_NVML_* so that GPU 2 reports the
power-cap clock event reason and GPU 1 an Xid error.  The ranks are mapped
to GPUs as CUDA would: CUDA_VISIBLE_DEVICES lists GPUs 0-3 and the launcher
gives each rank LOCAL_RANK = its rank.  A real GPU is checked by
scripts/gpu_check.sh (docs/gpu.md).

The AMD test loads AMD SMI's TEST DOUBLE (tests/support/fake_amdsmi.c,
build/tests/libfake_amdsmi.so) through STEPSCOPE_AMDSMI_LIB with no NVML,
scripted by FAKE_AMDSMI_* so that GPU 2 reports a power violation and
GPU 1 uncorrectable ECC errors that arrive mid-run; the ranks are mapped
to GPUs as HIP would, through HIP_VISIBLE_DEVICES and LOCAL_RANK."""
import os
import sqlite3

from conftest import BUILD, example, run_job

FAKE_NVML = BUILD / "tests" / "libfake_nvml.so"
FAKE_AMDSMI = BUILD / "tests" / "libfake_amdsmi.so"
NO_AMDSMI = "/nonexistent/libamd_smi.so"


def gpu_env(**script):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("FAKE_NVML_", "FAKE_AMDSMI_")) or k in (
                "STEPSCOPE_NVML_LIB", "STEPSCOPE_AMDSMI_LIB",
                "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES"):
            del env[k]
    env["STEPSCOPE_AMDSMI_LIB"] = NO_AMDSMI
    env.update(script)
    return env


def test_gpu_evidence_and_findings_from_the_fake_nvml(store):
    assert FAKE_NVML.exists(), "build the test double first (make)"
    env = gpu_env(STEPSCOPE_NVML_LIB=str(FAKE_NVML), FAKE_NVML_GPUS="4",
                  FAKE_NVML_REASONS="2:0x4", FAKE_NVML_XID="1:79",
                  CUDA_VISIBLE_DEVICES="0,1,2,3")
    # The Xid is scripted as an error during the run: the health check,
    # which would see it before the ranks start, is off.
    job = run_job(store, 4, example("--steps", "150", "--compute-ms", "20"),
                  extra=("--no-http", "-q", "--no-gpu-check"), env=env)
    assert job.returncode == 0, job.stderr
    report = job.report()
    for rank in range(4):
        gpu = report["ranks"][rank]["host_evidence"]["gpu"]
        assert gpu is not None, rank
        assert gpu["total"]["gpu"] == rank
        assert gpu["steps"] > 100
    g2 = report["ranks"][2]["host_evidence"]["gpu"]
    assert g2["slowed_steps"] == g2["steps"]
    assert g2["power_cap_steps"] == g2["steps"]
    assert g2["total"]["power_cap_ms"] > 0
    g0 = report["ranks"][0]["host_evidence"]["gpu"]
    assert g0["slowed_steps"] == 0 and g0["total"]["slowed_ms"] == 0
    assert report["ranks"][1]["host_evidence"]["gpu"]["total"]["last_xid"] \
        == 79

    throttled = job.findings("gpu_throttled")
    assert len(throttled) == 1, report["findings"]
    assert throttled[0]["ranks"] == [2]
    assert "GPU 2 (rank 2) throttled (power cap) in 100 % of steps" in \
        throttled[0]["message"]
    errors = job.findings("gpu_error")
    assert len(errors) == 1, report["findings"]
    assert errors[0]["severity"] == "critical"
    assert errors[0]["ranks"] == [1]
    assert "GPU 1 (rank 1) reported Xid 79" in errors[0]["message"]

    con = sqlite3.connect(str(store))
    per_rank = dict(con.execute(
        "SELECT rank, count(*) FROM rank_steps WHERE gpu_index = rank "
        "GROUP BY rank"))
    con.close()
    assert sorted(per_rank) == [0, 1, 2, 3]


def test_amd_gpu_evidence_and_findings_from_the_fake_amdsmi(store):
    assert FAKE_AMDSMI.exists(), "build the test double first (make)"
    # GPU 1's ECC errors arrive mid-run, from its 10th reading (about 1 s
    # in at the 100 ms sampling interval; the job runs 3 s or more): from
    # the 30th they came at the job's very end and, on a loaded machine,
    # after it.
    env = gpu_env(STEPSCOPE_NVML_LIB="/nonexistent/libnvidia-ml.so.1",
                  STEPSCOPE_AMDSMI_LIB=str(FAKE_AMDSMI),
                  FAKE_AMDSMI_GPUS="4", FAKE_AMDSMI_VIOLATION="2:0x2",
                  FAKE_AMDSMI_ECC="1:2", FAKE_AMDSMI_ECC_AFTER="10",
                  HIP_VISIBLE_DEVICES="0,1,2,3")
    job = run_job(store, 4, example("--steps", "150", "--compute-ms", "20"),
                  extra=("--no-http", "-q", "--no-gpu-check"), env=env)
    assert job.returncode == 0, job.stderr
    report = job.report()
    for rank in range(4):
        gpu = report["ranks"][rank]["host_evidence"]["gpu"]
        assert gpu is not None, rank
        assert gpu["total"]["gpu"] == rank
        assert gpu["steps"] > 100
    g2 = report["ranks"][2]["host_evidence"]["gpu"]
    assert g2["slowed_steps"] == g2["steps"]
    assert g2["power_cap_steps"] == g2["steps"]
    g0 = report["ranks"][0]["host_evidence"]["gpu"]
    assert g0["slowed_steps"] == 0 and g0["total"]["slowed_ms"] == 0

    throttled = job.findings("gpu_throttled")
    assert len(throttled) == 1, report["findings"]
    assert throttled[0]["ranks"] == [2]
    assert "GPU 2 (rank 2) throttled (power cap) in 100 % of steps" in \
        throttled[0]["message"]
    errors = job.findings("gpu_error")
    assert len(errors) == 1, report["findings"]
    assert errors[0]["severity"] == "critical"
    assert errors[0]["ranks"] == [1]
    assert "GPU 1 (rank 1) reported 2 uncorrected ECC errors" in \
        errors[0]["message"]


def test_without_nvml_nothing_changes(store):
    env = gpu_env(STEPSCOPE_NVML_LIB="/nonexistent/libnvidia-ml.so.1",
                  CUDA_VISIBLE_DEVICES="0,1")
    job = run_job(store, 2, example("--steps", "40", "--compute-ms", "5"),
                  extra=("--no-http", "-q"), env=env)
    assert job.returncode == 0, job.stderr
    assert "NVML" not in job.stderr and "AMD SMI" not in job.stderr
    report = job.report()
    for rank in range(2):
        ev = report["ranks"][rank]["host_evidence"]
        assert ev is not None and ev["gpu"] is None
    assert not job.findings("gpu_throttled")
    assert not job.findings("gpu_error")
    con = sqlite3.connect(str(store))
    assert con.execute("SELECT count(*) FROM rank_steps WHERE gpu_index IS "
                       "NOT NULL").fetchone()[0] == 0
    con.close()


def test_an_unusable_gpu_library_is_said_once(store):
    # AMD SMI's test double without amdsmi_get_processor_handles: there,
    # but unusable.  The job goes on without GPU evidence.
    broken = BUILD / "tests" / "libfake_amdsmi_broken.so"
    env = gpu_env(STEPSCOPE_NVML_LIB="/nonexistent/libnvidia-ml.so.1",
                  STEPSCOPE_AMDSMI_LIB=str(broken))
    job = run_job(store, 2, example("--steps", "40", "--compute-ms", "5"),
                  extra=("--no-http", "-q", "--no-gpu-check"), env=env)
    assert job.returncode == 0, job.stderr
    said = [l for l in job.stderr.splitlines() if "GPUs not read" in l]
    assert len(said) == 1, job.stderr
    assert "AMD SMI unusable" in said[0] and \
        "has no amdsmi_get_processor_handles" in said[0]
    for rank in range(2):
        assert job.report()["ranks"][rank]["host_evidence"]["gpu"] is None
