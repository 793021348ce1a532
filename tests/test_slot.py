"""``python -m experiments.slot`` (`disentangle.reproduce.slot`): bad input, the throughput
figures of the smoke configs, and a tiny table queued, stopped at the slot's deadline, resumed by
the same call and equal to an uninterrupted run (`disentangle.reproduce.run.run_table`)."""
import functools
import json
import os
import pathlib
import subprocess
import sys
import time
import types

import pytest

from disentangle.reproduce import plan
from disentangle.reproduce import slot as slot_lib
from disentangle.reproduce import utilisation
from tests import helpers

FILES = {"throughput.json", "utilisation.csv", "table.json", "table.md", "log_tail.txt",
         "slot.json"}


def _cli(*args, env=None):
  return subprocess.run([sys.executable, "-m", "experiments.slot", *args], cwd=helpers.REPO, env=env,
                        capture_output=True, text=True, timeout=600, check=False)


def _tiny_table():
  """One row ``tiny`` of a tiny CascadeVAE config (4 steps, 2 seeds) on `helpers.TinyImages`."""
  return helpers.tiny_table(row="tiny", label="4", seeds=2, **{"cascade.penalty": 0.5})


def _check_summary(out: pathlib.Path) -> None:
  files = {p.name: p.stat().st_size for p in out.iterdir()}
  assert set(files) <= FILES and len(files) <= 8, files
  assert all(size <= 16 * 2**20 for size in files.values()), files


def _values(lines):
  return [(line["label"], line["status"], line["metrics"], [s["run_dir"] for s in line["per_seed"]])
          for line in json.loads(json.dumps(lines))]


def test_bad_queue_runs_and_workdir_name_the_flag(tmp_path):
  table, _, _ = _tiny_table()
  parse = functools.partial(slot_lib.parse_slot, minutes=5, out=tmp_path / "out",
                            tables={"tiny": table})
  for kwargs, message in (
      ({"queue": "table9"}, "--queue: unknown table 'table9'; known tables: tiny"),
      ({"queue": "tiny:0"}, "--queue: 'tiny:0': seeds: "),
      ({"queue": "tiny:2:1.5"}, "--queue: 'tiny:2:1.5': fraction: "),
      ({"queue": "tiny:2:1:x"}, "--queue: 'tiny:2:1:x' is not table[/rows][:seeds[:fraction]]"),
      ({"queue": "tiny:2,tiny:2:1"}, "--queue: tiny:2:1 is queued twice"),
      ({"queue": "tiny/nope"}, "--queue: tiny has no row 'nope'; its rows: fake.tiny"),
      ({"queue": "tiny/fake.tiny+fake.m6"}, "--queue: tiny has no row 'fake.m6'; its rows: "),
      ({"queue": "tiny/:2"}, "--queue: 'tiny/:2' is not table[/rows][:seeds[:fraction]]"),
      ({"queue": "tiny/fake.tiny:2,tiny/fake.tiny"},
       "--queue: tiny/fake.tiny:2:1 is queued twice"),
      ({"queue": "tiny", "runs": ["1", "0"]}, "--runs: "),
      ({"queue": "tiny", "workdir": tmp_path / "out" / "w"}, "--slot_workdir: "),
      ({"queue": "tiny", "minutes": "nan"}, "--minutes: "),
      ({"queue": "tiny", "throughput_minutes": "5"}, "--throughput_minutes: "),
      ({"queue": "tiny", "throughput_minutes": "-1"}, "--throughput_minutes: "),
      ({"queue": "tiny", "dataset_source": "file"}, "--dataset_source: "),
  ):
    with pytest.raises(plan.BadInput) as e:
      parse(**kwargs)
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)
  assert list(tmp_path.iterdir()) == []
  assert parse(queue="tiny").throughput_s() == pytest.approx(0.15 * 5 * 60)
  assert parse(queue="tiny", throughput_minutes="2.5").throughput_s() == pytest.approx(150)
  assert parse(queue="tiny", minutes=60).throughput_s() == pytest.approx(300)
  assert (parse(queue="tiny").dataset_source, parse(queue="tiny", dataset_source="render")
          .dataset_source) == ("", "render")
  slot = parse(queue="tiny, tiny:1:1/2, tiny/fake.tiny")
  assert [e.spec for e in slot.queue] == ["tiny:2:1", "tiny:1:1/2", "tiny/fake.tiny:2:1"]
  assert [e.rows for e in slot.queue] == [None, None, (0,)]
  assert slot.table_dir(slot.queue[2]) == slot.table_dir(slot.queue[0])  # rows share the folder
  assert slot.workdir == tmp_path / "out_workdir"
  assert slot.table_dir(slot.queue[1]) == tmp_path / "out_workdir" / "tables" / "tiny-s1-f1_2"


def _is_cascadevae(row) -> bool:
  """CascadeVAE itself, not its ablations (CascadeVAE-C, -D) nor a baseline."""
  return row.label == "CascadeVAE" or row.label.startswith("CascadeVAE (")


def test_default_queue_starts_with_cascadevae_rows(tmp_path):
  """The rows in the order the default queue trains them (an entry skips what an earlier one
  did): Table 1's m6 CascadeVAE, Table 3's CascadeVAE rows, every other CascadeVAE row, then the
  baselines; every row of Tables 1 and 3 is queued once."""
  from experiments import tables  # pylint: disable=g-import-not-at-top
  slot = slot_lib.parse_slot(minutes=5, out=tmp_path / "out", tables=tables.TABLES)
  order = []
  for entry in slot.queue:
    rows = range(len(entry.table.rows)) if entry.rows is None else entry.rows
    order += [(entry.table.name, r) for r in rows if (entry.table.name, r) not in order]
  row = lambda key: tables.TABLES[key[0]].rows[key[1]]
  assert (order[0][0], row(order[0]).label, row(order[0]).m) == (
      "cascadevae_table1", "CascadeVAE (beta_l = 1.0)", "6")
  table3 = tables.TABLES["cascadevae_table3"]
  assert order[1:3] == [("cascadevae_table3", i) for i, r in enumerate(table3.rows)
                        if _is_cascadevae(r)] and len(order[1:3]) == 2
  claims = [_is_cascadevae(row(k)) for k in order]
  assert claims == sorted(claims, reverse=True) and sum(claims) == 4  # 2 in each table
  assert sorted(order) == sorted((t, i) for t in ("cascadevae_table1", "cascadevae_table3")
                                 for i in range(len(tables.TABLES[t].rows)))
  assert {e.directory for e in slot.queue} == {"cascadevae_table1-s10-f1",
                                               "cascadevae_table3-s10-f1"}


def test_nvidia_smi_lines_parse_per_gpu():
  assert utilisation.GpuSampler.parse("87, 1024\n[N/A], 3\n\n") == [(87.0, 1024.0), (None, 3.0)]


@pytest.mark.slow
@pytest.mark.parametrize("args,flag", [
    (["--minutes=-1.5"], "--minutes"), (["--minutes=5", "--out={file}/out"], "--out")])
def test_command_line_bad_input_is_one_line_and_creates_nothing(tmp_path, args, flag):
  (tmp_path / "file").write_text("")
  args = [a.format(file=tmp_path / "file") for a in args]
  if not any(a.startswith("--out=") for a in args):
    args.append(f"--out={tmp_path / 'out'}")
  proc = _cli(*args)
  lines = [line for line in proc.stderr.splitlines() if line.strip() and
           "libtpu" not in line and "tpu" not in line.lower()]
  assert proc.returncode == 2, proc.stderr
  assert len(lines) == 1 and lines[0].startswith(f"error: {flag}: "), proc.stderr
  assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.fixture(scope="module")
def two_rows(tmp_path_factory):
  """The table ``two`` (rows ``tiny`` and ``other``: `_tiny_table`'s config, 1 seed) queued as
  ``two/fake.other``, then as ``two/fake.other,two``: what each call left. Its ``tiny`` row is a
  program never stopped (the reference of the slot stopped at its deadline below)."""
  table, modules, kwargs = _tiny_table()
  config = modules["fake"].get_config("tiny")
  modules = {"fake": helpers.fake_experiment({"tiny": config, "other": config})}
  two = plan.Table("two", "two rows", "test", ("accuracy",),
                   (table.rows[0], plan.Row("other", "4", "fake", "other")), "final", seeds=1)
  out = tmp_path_factory.mktemp("slot") / "out"
  out.mkdir()
  (out / "throughput.json").write_text("{}")
  first = slot_lib.parse_slot(minutes=30, out=out, queue="two/fake.other", tables={"two": two})
  seen = {"first_status": slot_lib.run_slot(first, modules=modules, **kwargs)}
  folder = first.table_dir(first.queue[0])
  files = lambda: {p: p.stat().st_mtime_ns for p in (folder / "runs" / "fake_other").rglob("*")  # noqa: E731
                   if p.is_file()}
  seen.update(first_programs=sorted(p.name for p in (folder / "runs").iterdir() if p.is_dir()),
              first_lines=json.loads((folder / "table.json").read_text())["lines"],
              first_files=files())
  both = slot_lib.parse_slot(minutes=30, out=out, queue="two/fake.other,two",
                             tables={"two": two})
  seen.update(second_status=slot_lib.run_slot(both, modules=modules, **kwargs), second_files=files(),
              second_lines=json.loads((folder / "table.json").read_text())["lines"],
              log=(out.parent / "out_workdir" / "slot.log").read_text(),
              text=(out / "table.md").read_text())
  return seen


@pytest.mark.slow
def test_a_slot_measures_then_runs_its_queue_to_the_deadline_and_the_same_call_resumes(
    tmp_path, monkeypatch, two_rows):
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  out, workdir = tmp_path / "out", tmp_path / "w"
  # The command on the smoke configs, nothing queued: throughput figures, within the budget. A
  # stand-in nvidia-smi reports a GPU 55% busy.
  fake = tmp_path / "bin" / "nvidia-smi"
  fake.parent.mkdir()
  fake.write_text("#!/bin/sh\necho '55, 1234'\n")
  fake.chmod(0o755)
  env = dict(os.environ, PATH=f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
  # No throughput budget: the first unit's figures alone, the others listed as skipped.
  proc = _cli("--smoke", "--minutes=2", "--throughput_minutes=0", "--runs=1", f"--out={out}",
              f"--slot_workdir={workdir}", "--queue=", env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  measured = json.loads((out / "throughput.json").read_text())
  units = {(f["config"], f["phase"], f["solver"]) for f in measured["figures"]}
  units |= {(s["config"], s["phase"], s["solver"]) for s in measured["skipped"]}
  after = {("after", "scipy"), ("after", "hungarian"), ("after", "scipy_overlapped")}
  assert units == {("dsprites_cascade", p, s) for p, s in after | {("before", "scipy")}} | {
      ("mnist_cascade", p, s) for p, s in after}  # MNIST m10: t_d = 0, no step before it
  assert measured["figures"][0]["phase"] == "before" and measured["smoke"]
  assert [(f["config"], f["phase"], f["solver"]) for f in measured["figures"]] == [
      ("dsprites_cascade", "before", "scipy"), ("dsprites_cascade", "after", "scipy")]
  assert {s["reason"] for s in measured["skipped"]} == {"throughput budget spent"}
  for f in measured["figures"]:
    assert f["runs"] == 1 and f["run_steps_per_s"] > 0 and f["timed_steps"] >= 2
    # one run: nothing to overlap, the one program's callback solves its problem
    assert f["callbacks_per_step"] == (1.0 if f["phase"] == "after" and f["solver"] != "hungarian"
                                       else 0.0)
    assert f["busy_share"] in (0.55, None) and f["memory_used_mib_max"] in (1234, None)
  assert any(f["busy_share"] == 0.55 for f in measured["figures"])
  rows = (out / "utilisation.csv").read_text().splitlines()
  assert rows[0] == "time,label,gpu,utilization_gpu_percent,memory_used_mib"
  assert any(r.endswith(",dsprites_cascade:m6;smoke runs=1 solver=scipy,0,55,1234") for r in rows)
  assert any((workdir / slot_lib.CACHE).iterdir())  # kept for the next call
  _check_summary(out)

  # A tiny table queued (one seed); the deadline passes at its first step: a checkpoint, the
  # summary.
  table, modules, kwargs = _tiny_table()
  slot = slot_lib.parse_slot(minutes=3, out=out, workdir=workdir, queue="tiny:1",
                             tables={"tiny": table}, command="slot")
  kept = (out / "throughput.json").stat().st_mtime_ns
  monkeypatch.setattr(preemption.Signals, "passed", lambda self: self.deadline is not None)
  with pytest.raises(preemption.DeadlineReached, match="at step 1 of 4"):
    slot_lib.run_slot(slot, modules=modules, **kwargs)
  monkeypatch.undo()
  program = slot.table_dir(slot.queue[0]) / "runs" / "fake_tiny"
  assert sorted(p.name for p in (program / "checkpoints").iterdir()) == ["1"]
  state = json.loads((out / "slot.json").read_text())
  assert state["status"] == "stopped at the deadline" and state["seeds"] == {"tiny": 1}
  assert state["queue"][0]["evaluated"] == 0 and state["queue"][0]["lines"] == 1
  assert state["throughput"].startswith("kept")
  assert (out / "throughput.json").stat().st_mtime_ns == kept
  assert "stopped at the deadline" in (out / "table.md").read_text()
  _check_summary(out)

  # The same call again resumes and finishes: the table equals an uninterrupted run's.
  assert slot_lib.run_slot(slot, modules=modules, **kwargs) == 0
  reference = two_rows["second_lines"][:1]  # the same program, never stopped
  assert reference[0]["label"] == "tiny" and reference[0]["status"] == "evaluated"
  (merged,) = json.loads((out / "table.json").read_text())["tables"]
  assert merged["status"] == "done" and merged["evaluated"] == 1
  assert merged["table"]["lines"][0]["status"] == "evaluated"
  assert _values(merged["table"]["lines"]) == _values(reference)

  # Once more: nothing trained or evaluated again.
  files = {p: p.stat().st_mtime_ns for p in program.rglob("*") if p.is_file()}
  assert slot_lib.run_slot(slot, modules=modules, **kwargs) == 0
  assert {p: p.stat().st_mtime_ns for p in program.rglob("*") if p.is_file()} == files
  state = json.loads((out / "slot.json").read_text())
  assert state["status"] == "done" and len(state["previous_calls"]) == 3
  assert state["previous_calls"][0]["throughput"].startswith("measured")
  assert "tiny: [1/1]" in (out / "log_tail.txt").read_text()
  _check_summary(out)


@pytest.mark.slow
def test_the_phases_time_the_overlapped_step_with_a_callback_per_group():
  """`throughput.time_runs`, the slot's throughput unit, on 2 unrolled tiny CascadeVAE
  runs after t_d with the host's solves overlapped (``scipy_overlapped``): the four programs of a
  step call back once per group, twice a step (the one program's figures: the slot's test)."""
  from disentangle.reproduce import throughput  # pylint: disable=g-import-not-at-top
  config = helpers.tiny_config("cascadevae", seed_layout="unroll", assignment_placement="overlapped")
  records = throughput.time_runs(config, 2, image=(32, 32, 1), steps=2, warmup=1, only=("after",))
  (record,) = records.values()
  assert record["runs"] == 2 and record["timed_steps"] == 2 and record["run_steps_per_s"] > 0
  assert record["callbacks_per_step"] == 2.0 and record["top_level_ops"] is None


def test_the_slot_hands_its_config_modules_and_dataset_source_down(tmp_path, monkeypatch):
  """The throughput figures build their configs from the slot's ``modules`` (the library imports
  no experiment) and ``--dataset_source`` reaches every queued table (recorded in slot.json);
  the steps and the tables themselves are stubs here (their runs: the tests above)."""
  from disentangle import config as config_lib  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import run  # pylint: disable=g-import-not-at-top
  from disentangle.reproduce import throughput  # pylint: disable=g-import-not-at-top
  table, modules, kwargs = _tiny_table()
  config, asked, queued = modules["fake"].get_config("tiny"), [], []
  configs = types.SimpleNamespace(
      get_config=lambda variant: asked.append(variant) or config_lib.copy(config))

  def time_runs(c, runs, **_):
    now = time.time()
    return {"after": {"phase": "after", "runs": runs, "run_steps_per_s": 1.0, "timed_from": now,
                      "timed_to": now}}
  monkeypatch.setattr(throughput, "time_runs", time_runs)
  monkeypatch.setattr(run, "run_table", lambda *args, **kw: queued.append(kw))
  slot = slot_lib.parse_slot(minutes=5, out=tmp_path / "out", queue="tiny", runs=["1"],
                             tables={"tiny": table}, dataset_source="render")
  assert slot_lib.run_slot(slot, modules={"dsprites_cascade": configs,
                                          "mnist_cascade": configs}, scale=kwargs["scale"]) == 0
  assert sorted(set(asked)) == ["m10", "m6"]
  measured = json.loads((tmp_path / "out" / "throughput.json").read_text())
  assert {f["config"] for f in measured["figures"]} == {"dsprites_cascade", "mnist_cascade"}
  assert [kw["dataset_source"] for kw in queued] == ["render"]
  assert json.loads((tmp_path / "out" / "slot.json").read_text())["dataset_source"] == "render"


def test_a_failed_table_is_reported_and_the_queue_goes_on(tmp_path):
  """A table whose config is refused fails in one line; the next one still runs (here it stops
  at the deadline, already past); the throughput of an earlier call is kept."""
  from disentangle.train import preemption  # pylint: disable=g-import-not-at-top
  table, modules, kwargs = _tiny_table()
  bad = helpers.fake_experiment({"bad": helpers.tiny_config("cascadevae",
                                                            **{"cascade.solver": "nope"})})
  broken = plan.Table("broken", "a broken table", "test", ("accuracy",),
                      (plan.Row("bad", "4", "bad", "bad"),), "final", seeds=1)
  out = tmp_path / "out"
  out.mkdir()
  (out / "throughput.json").write_text("{}")
  slot = slot_lib.parse_slot(minutes=1, out=out, queue="broken,tiny",
                             tables={"broken": broken, "tiny": table}, command="slot")
  with pytest.raises(preemption.DeadlineReached, match="before the training of program 1/1"):
    slot_lib.run_slot(slot, modules=dict(modules, bad=bad), started=0.0, **kwargs)
  state = json.loads((out / "slot.json").read_text())
  failed, tiny = state["queue"]
  assert failed["status"].startswith("failed: ") and "cascade.solver" in failed["status"]
  assert tiny["status"] == "stopped at the deadline" and state["status"] == tiny["status"]
  assert (out / "throughput.json").read_text() == "{}"
  assert "## broken:1:1: failed: " in (out / "table.md").read_text()
  _check_summary(out)


@pytest.mark.slow
def test_queued_rows_train_first_and_the_whole_table_later_only_the_others(two_rows):
  """``two/fake.other`` trains that row's program only, in the table's folder; the whole table
  queued next trains the other row and leaves the first program's files as they were."""
  assert two_rows["first_status"] == 0 and two_rows["second_status"] == 0
  assert two_rows["first_programs"] == ["fake_other"]
  assert [(l["label"], l["status"] == "evaluated") for l in two_rows["first_lines"]] == [
      ("tiny", False), ("other", True)]
  assert two_rows["second_files"] == two_rows["first_files"] != {}
  assert [l["status"] for l in two_rows["second_lines"]] == ["evaluated", "evaluated"]
  log = two_rows["log"]
  assert log.count("training in") == 2 and "two: [1/1] fake:other (1 runs" in log
  assert "two: [1/2] fake:tiny (1 runs, 4 steps): training in" in log
  text = two_rows["text"]
  # the table's table.md once: its row in the compact table and in the full one
  assert text.count("## two") == 2 and text.count("| tiny") == 2, text
