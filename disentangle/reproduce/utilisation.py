"""The device's busy share: nvidia-smi's ``utilization.gpu`` and ``memory.used`` sampled in a
background thread, for the slot (`disentangle.reproduce.slot`) and its throughput figures
(`disentangle.reproduce.throughput`). Without nvidia-smi nothing is sampled and every share is
None.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import threading
import time
from typing import Any, Optional

SAMPLE_S = {"throughput": 0.2, "queue": 2.0}
UTILISATION_ROWS = 200_000  # about 8 MiB of utilisation.csv


class GpuSampler:
  """nvidia-smi's ``utilization.gpu`` and ``memory.used`` of every GPU, sampled in a thread.

  ``utilization.gpu`` is the share of the last sample period in which a kernel ran; its mean
  over a span is the device's busy share. Without the binary nothing is sampled (``available``
  False, every share None). Samples: ``(time.time(), label, gpu, percent, MiB)``.
  """

  QUERY = ("--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits")
  HEADER = "time,label,gpu,utilization_gpu_percent,memory_used_mib"

  def __init__(self, previous_csv: Optional[pathlib.Path] = None):
    self.binary = shutil.which("nvidia-smi")
    self.available = self.binary is not None
    self.samples: list[tuple] = []
    self.label, self.interval_s = "start", SAMPLE_S["throughput"]
    self._previous = []
    if previous_csv is not None and previous_csv.is_file():
      self._previous = previous_csv.read_text().splitlines()[1:]
    self._lock, self._stop, self._thread = threading.Lock(), threading.Event(), None

  def __enter__(self) -> "GpuSampler":
    if self.available:
      self._thread = threading.Thread(target=self._loop, name="nvidia-smi", daemon=True)
      self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join(timeout=15)

  @staticmethod
  def parse(text: str) -> list[tuple[Optional[float], Optional[float]]]:
    """``(percent, MiB)`` per GPU line of the query (None for ``[N/A]``)."""
    def number(s):
      try:
        return float(s)
      except ValueError:
        return None
    rows = [[p.strip() for p in line.split(",")] for line in text.splitlines() if line.strip()]
    return [(number(r[0]), number(r[1])) for r in rows if len(r) == 2]

  def _loop(self) -> None:
    while not self._stop.is_set():
      t, label = time.time(), self.label
      try:
        text = subprocess.run([self.binary, *self.QUERY], capture_output=True, text=True,
                              timeout=10, check=False).stdout
      except (OSError, subprocess.SubprocessError):
        text = ""
      with self._lock:
        self.samples.extend((t, label, i, u, m) for i, (u, m) in enumerate(self.parse(text)))
      self._stop.wait(self.interval_s)

  def window(self, start: float, end: float) -> dict[str, Any]:
    """Busy share (mean utilization.gpu / 100 over every GPU) and peak memory in [start, end]."""
    with self._lock:
      inside = [s for s in self.samples if start <= s[0] <= end]
    util = [s[3] for s in inside if s[3] is not None]
    mem = [s[4] for s in inside if s[4] is not None]
    return {"busy_share": round(sum(util) / len(util) / 100, 4) if util else None,
            "memory_used_mib_max": max(mem) if mem else None, "gpu_samples": len(inside)}

  def csv_text(self) -> str:
    """The earlier calls' rows then this one's, the last `UTILISATION_ROWS`."""
    text = lambda v: "" if v is None else f"{v:g}"
    with self._lock:
      rows = [f"{t:.2f},{label.replace(',', ';')},{gpu},{text(u)},{text(m)}"
              for t, label, gpu, u, m in self.samples]
    return "\n".join([self.HEADER] + (self._previous + rows)[-UTILISATION_ROWS:]) + "\n"
