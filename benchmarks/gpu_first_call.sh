#!/usr/bin/env bash
# The first command on a lent GPU: the lever command, then the slot with the tables it queues,
# everything the reader needs written under OUT (at most eight files).
#
#   bash benchmarks/gpu_first_call.sh OUT SECONDS [QUEUE]
#
# SECONDS is the whole command's budget: the levers get LEVER_SHARE of it (default 0.38), the
# slot the rest less a margin. QUEUE is the slot's --queue (default: CascadeVAE's Tables 1 and 2,
# five seeds at 1/50 of the schedule, CascadeVAE's rows and beta-VAE's first). A wheel folder
# .whl (ml-collections, which JAX's GPU images lack) is installed to /tmp/site first; the checkout
# goes on PYTHONPATH, never `pip install -e .` over the image's JAX. LEVER_FLAGS adds flags to
# the lever command (e.g. --smoke for a dry run on a CPU). The lent GPU has no official dSprites
# file: the slot trains on the rendered set on purpose (--dataset_source=render, its scores marked
# not comparable); DATASET_SOURCE= (empty) asks for the official file in DISENTANGLE_DATA_DIR.
set -uo pipefail
out=${1:?OUT}; total=${2:?SECONDS}
queue=${3:-cascadevae_table1/dsprites_cascade.m6+dsprites_betavae.beta4_m10:5:1/50,cascadevae_table2/dsprites_cascade.m6+dsprites_jointvae.m6:5:1/50,cascadevae_table2/dsprites_cascade.m4+dsprites_jointvae.m4:5:1/50}
start=$SECONDS
mkdir -p "$out"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export DISENTANGLE_DATA_DIR=${DISENTANGLE_DATA_DIR:-/tmp/disentangle_data}
mkdir -p "$DISENTANGLE_DATA_DIR"
site=$PWD
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 2
  site=/tmp/site:$PWD
fi
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
workdir=${SLOT_WORKDIR:-/tmp/slot_workdir}
dataset_source=${DATASET_SOURCE-render}

# The rendered dSprites set, cached once, beside the levers (a CPU's work while they use the GPU).
python3 -c "from disentangle.data.datasets import dsprites as d; d.rendered_packed('$DISENTANGLE_DATA_DIR')" &
render=$!

levers=$(python3 -c "print(int($total * ${LEVER_SHARE:-0.38}))")
# shellcheck disable=SC2086
python3 -m benchmarks.gpu_levers --out="$out/levers.jsonl" --deadline_s="$levers" \
  ${LEVER_FLAGS:-} >/dev/null
echo "levers: exit $?, $((SECONDS - start)) s"
wait $render

minutes=$(python3 -c "print(round(($total - ($SECONDS - $start) - 25) / 60, 2))")
python3 -m experiments.slot --minutes="$minutes" --out="$out/slot" --slot_workdir="$workdir" \
  --throughput_minutes=0 --runs=10 --queue="$queue" \
  ${dataset_source:+--dataset_source="$dataset_source"}
status=$?
echo "slot: exit $status, $((SECONDS - start)) s"
# The traversals of CascadeVAE's runs (continuous and discrete) as their figure writer drew them.
find "$workdir" -path '*dsprites_cascade*' -name '*travers*.png' 2>/dev/null | sort \
  | tar cf "$out/traversals.tar" -T - && tar tf "$out/traversals.tar" | head -20
exit $status
