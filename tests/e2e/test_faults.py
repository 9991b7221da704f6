"""Each injected fault is found, with the right kind, rank and phase; a
clean run, even with more ranks than cores, produces no finding."""
from conftest import again_on_false_alarm, example, run_job


def only(findings, kind):
    hits = [f for f in findings if f["kind"] == kind]
    assert hits, f"no {kind} finding in {findings}"
    return hits


def test_straggler_named_with_its_phase(store):
    job = run_job(store, 4, example("--steps", "80", "--compute-ms", "4",
                                    "--straggler", "2:25:compute"))
    assert job.returncode == 0, job.stderr
    report = job.report()
    hits = only(report["findings"], "straggler")
    assert hits[0]["ranks"] == [2]
    assert hits[0]["phase"] == "compute"
    assert "rank 2" in hits[0]["message"]
    # No other rank is blamed.
    assert all(f["ranks"] == [2] for f in hits)


def test_data_stall_on_one_rank(store):
    job = run_job(store, 4, example("--steps", "80", "--compute-ms", "4",
                                    "--data-stall", "1:8:80"))
    assert job.returncode == 0, job.stderr
    hits = only(job.findings(), "data_stall")
    assert hits[0]["ranks"] == [1]
    assert hits[0]["phase"] in ("data", None)


def test_memory_creep_on_one_rank(store):
    job = run_job(store, 3, example("--steps", "80", "--compute-ms", "3",
                                    "--memory-creep", "1:2097152"))
    assert job.returncode == 0, job.stderr
    hits = only(job.findings(), "memory_creep")
    assert hits[0]["ranks"] == [1]
    slope = hits[0]["evidence"]["bytes_per_step"]
    assert abs(slope - 2097152) / 2097152 < 0.2, slope


def test_memory_spike_on_one_rank(store):
    job = run_job(store, 3, example("--steps", "60", "--compute-ms", "3",
                                    "--memory-spike", "0:30:268435456"))
    assert job.returncode == 0, job.stderr
    hits = only(job.findings(), "memory_spike")
    assert hits[0]["ranks"] == [0]
    assert hits[0]["first_step"] <= 31 <= hits[0]["last_step"] + 1


def clean_report(store, nprocs, cmd):
    """The report of a clean job, run a second time when the first has a
    finding (again_on_false_alarm).  A clean job of 4 ranks on 2 cores,
    built with the sanitizers beside other tests, had one rank steadily
    late, last in 26 of 42 steps, once."""
    def run(attempt):
        job = run_job(store, nprocs, cmd)
        assert job.returncode == 0, job.stderr
        return job.report()
    return again_on_false_alarm(run, lambda report: report["findings"])


def test_clean_run_has_no_findings(store):
    report = clean_report(store, 4, example("--steps", "80",
                                            "--compute-ms", "4"))
    assert report["findings"] == [], report["findings"]
    assert report["steps"]["count"] >= 75


def test_clean_run_with_more_ranks_than_cores(store):
    report = clean_report(store, 8, example("--steps", "60",
                                            "--compute-ms", "3"))
    assert report["findings"] == [], report["findings"]
    assert len(report["ranks"]) == 8
