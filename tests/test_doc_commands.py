"""Every ``python -m experiments...`` command of README.md and docs/results.md runs as written:
a training command passes ``--dry_run``'s checks (`launch.plan`: the config file, its variant,
every override, the config's validation), a table command prints its programs under
``--dry_run``, and any other command names only flags its entry point defines. Placeholders
(``RUN``, a value ``B``) are filled with a folder and a value."""
import pathlib
import re
import subprocess
import sys

import pytest

from disentangle import launch
from tests import helpers

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/results.md")
PLACEHOLDERS = {"RUN_FFVAE": "runs/ffvae", "RUN_ALPHA0": "runs/alpha0", "RUN": "runs/run"}
_STOP = ("&&", "|", "#", ";")


def _commands_in(text: str) -> list[str]:
  """The commands of a page: in fenced blocks (lines joined at a trailing backslash) and in
  inline code spans (which may wrap over a line)."""
  found, spans = [], []
  for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
    spans += block.replace("\\\n", " ").splitlines()
  prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
  spans += [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", prose)]
  for span in spans:
    for match in re.finditer(r"python -m experiments\.[a-z_]+(?=[\s)]|$).*", span):
      words = []
      for word in match.group(0).split():
        if word in _STOP:
          break
        words.append(word.strip('"'))
      if words[2].endswith(")"):  # a module named in prose: "(python -m experiments.slot)"
        continue
      found.append(" ".join(words))
  return found


def commands() -> list[tuple[str, str, list[str]]]:
  """(page, module, arguments) of every command, placeholders filled."""
  out = []
  for page in PAGES:
    for command in _commands_in((ROOT / page).read_text()):
      for key, value in PLACEHOLDERS.items():
        command = re.sub(rf"(?<![A-Za-z_]){re.escape(key)}(?![A-Za-z_0-9])", value, command)
      command = re.sub(r"=B(?=[\s,]|$)", "=2.0", command)  # a value to choose
      words = command.split()
      out.append((page, words[2], words[3:]))
  return out


def _is_training(module: str) -> bool:
  path = ROOT / (module.replace(".", "/") + ".py")
  return "launch.main(" in path.read_text()


def test_the_pages_hold_commands_of_every_kind():
  modules = {m for _, m, _ in commands()}
  assert {"experiments.mnist_cascade", "experiments.reproduce", "experiments.evaluate"} <= modules
  for _, module, _ in commands():
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module


@pytest.mark.parametrize("page, module, args", [c for c in commands() if _is_training(c[1])],
                         ids=lambda v: v if isinstance(v, str) and "/" not in v else None)
def test_a_training_command_passes_its_dry_run(page, module, args, monkeypatch):
  monkeypatch.chdir(ROOT)
  default = f"experiments/configs/{module.split('.')[1]}.py"
  if not any(a.startswith("--config") for a in args):
    args = [f"--config={default}", *args]
  assert launch.plan(args).startswith("dry run: "), (page, module, args)


def _flags_of(module: str) -> set[str]:
  done = subprocess.run([sys.executable, "-m", module, "--helpfull"], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
  assert not helpers.library_log_lines(done.stdout + done.stderr), (module, done.stderr[-500:])
  return set(re.findall(r"^\s+--(?:\[no\])?([a-z_0-9]+)", done.stdout, flags=re.M))


@pytest.mark.slow
def test_the_other_commands_run_as_written(tmp_path):
  others = [c for c in commands() if not _is_training(c[1])]
  known = {module: _flags_of(module) for module in {m for _, m, _ in others}}
  for page, module, args in others:
    for a in args:
      if a.startswith("--"):
        name = a[2:].split("=", 1)[0]
        assert name in known[module] or name.removeprefix("no") in known[module], \
            (page, module, a)
    if module == "experiments.reproduce":
      args = [a if not a.startswith("--workdir=") else f"--workdir={tmp_path / 't'}"
              for a in args]
      done = subprocess.run([sys.executable, "-m", module, *args, "--dry_run"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
      assert done.returncode == 0, (page, args, done.stdout[-500:], done.stderr[-500:])
      assert not helpers.library_log_lines(done.stdout + done.stderr), (page, done.stderr[-500:])


def test_the_dry_run_flag_trains_nothing(tmp_path):
  done = subprocess.run(
      [sys.executable, "-m", "experiments.mnist_cascade",
       "--config=experiments/configs/mnist_cascade.py:m10", f"--workdir={tmp_path / 'w'}",
       "--dry_run"], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-800:]
  assert done.stdout.startswith("dry run: cascadevae on mnist, 120,000 steps, seed 0")
  assert not helpers.library_log_lines(done.stdout + done.stderr), done.stderr[-800:]
  assert not (tmp_path / "w").exists()
