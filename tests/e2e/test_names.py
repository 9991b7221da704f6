"""Name limits never cost a rank its connection or its steps.

The ranks run tests/e2e/many_names.c: each step records the phase "work",
the metric "loss" and 60 more metrics rotating through names of the rank's
own.  Names beyond the run's table (255) are refused by the controller and
what is recorded under them is dropped and counted; names beyond what one
process may intern (255) are dropped and counted by the recorder.  Either
way every step of every rank is stored with its known values, and the
loss shows in the summary and the store.
"""
import sqlite3
import subprocess

from conftest import BUILD, STEPSCOPE, run_job

MANY_NAMES = BUILD / "tests" / "many_names"
STEPS = 40
RUN_NAMES = 255


def query(db, sql):
    con = sqlite3.connect(str(db))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def assert_every_step_stored(job, world):
    assert job.returncode == 0, job.stderr
    assert "rejected a connection" not in job.stderr, job.stderr
    assert f"{STEPS} steps finalized" in job.stderr, job.stderr
    assert query(job.db, "SELECT count(*), min(n_present), max(n_missing) "
                         "FROM steps") == [(STEPS, world, 0)]
    # The known names keep flowing: "loss" is the step, "work" ran.
    rows = query(job.db, "SELECT step, json_extract(metrics, '$.loss'), "
                         "json_extract(phases, '$.work') FROM rank_steps")
    assert len(rows) == STEPS * world
    for step, loss, work in rows:
        assert loss == step
        assert work is not None and work > 0
    states = query(job.db, "SELECT state FROM ranks")
    assert states == [("exited",)] * world


def test_ranks_over_the_run_name_limit_keep_their_steps(store):
    # 2 ranks x 200 names of their own + "work" + "loss": 402 names, 147
    # more than the run's table holds.
    job = run_job(store, 2, [str(MANY_NAMES), str(STEPS), "200", "60"])
    assert_every_step_stored(job, 2)
    refused_total = 2 * 200 + 2 - RUN_NAMES
    ranks = query(store, "SELECT rank, names_over_limit, values_over_limit "
                         "FROM ranks ORDER BY rank")
    assert sum(r[1] for r in ranks) == refused_total
    assert sum(r[2] for r in ranks) > 0
    over = [r[0] for r in ranks if r[1] > 0]
    assert over
    for rank, names, values in ranks:
        assert (names > 0) == (values > 0), ranks
    # One event per rank that went over, the first time.
    events = query(store, "SELECT rank, message FROM events "
                          "WHERE kind = 'names_over_limit' ORDER BY rank")
    assert [e[0] for e in events] == over
    assert f"the run's {RUN_NAMES} names were taken" in events[0][1]
    values = sum(r[2] for r in ranks)
    assert (f"{len(over)} rank{'s' if len(over) > 1 else ''} could not add "
            f"{refused_total} names to the run's {RUN_NAMES}: {values} "
            "phase, sync and metric values under them dropped") in job.stderr
    # The report says it too, in text and JSON.
    report = job.report()
    assert report["dropped"]["names_over_limit"] == refused_total
    assert report["dropped"]["values_over_limit"] == values
    by_rank = {k["rank"]: k["names_over_limit"] for k in report["ranks"]}
    assert by_rank == {r[0]: r[1] for r in ranks}
    text = subprocess.run([str(STEPSCOPE), "report", "--db", str(store)],
                          capture_output=True, text=True, timeout=60)
    assert (f"over the run's name limit: {values} values under "
            f"{refused_total} names") in text.stdout, text.stdout


def test_a_process_over_its_own_name_limit_keeps_its_steps(store):
    # One rank, 300 names of its own + 2: the last 47 cannot be interned
    # (ss_name returns 0); what it records under them is counted as
    # dropped events, and the 255 it has fill the run's table exactly.
    job = run_job(store, 1, [str(MANY_NAMES), str(STEPS), "300", "60"])
    assert_every_step_stored(job, 1)
    result = job.results()[0]
    assert result["refused_names"] == 300 + 2 - 255
    assert result["dropped_events"] > 0
    assert query(store, "SELECT names_over_limit, values_over_limit, "
                        "dropped_events FROM ranks") == [
        (0, 0, result["dropped_events"])]
    assert f"{result['dropped_events']} events and 0 step records dropped " \
           "by ranks" in job.stderr
