#!/usr/bin/env bash
# A one-node Slurm cluster on 127.0.0.1, for the tests of tests/test_slurm.py and for trying
# docs/cluster.md on one machine. Debian's packages, as root, without systemd:
#   apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge
#   .ci/slurm_cluster.sh            # (re)start: munged, slurmctld, slurmd; waits for the node
#   .ci/slurm_cluster.sh stop       # stop the three daemons
# No accounting (no slurmdbd: sacct does not work; squeue and scontrol do), processes tracked by
# their parent (proctrack/linuxproc), no task binding (task/none). The controller's state and the
# node's spool are cleared before each start, so that a start never sees the jobs of the last.
# The node's CPUs and memory are what `slurmd -C` reports (SLURM_CPUS=N overrides the CPUs, so
# that a two-core machine can run more one-CPU tasks at once).
# Short waits for tests: a requeued job may start again 6 s after its requeue, not two minutes
# (AuthInfo's cred_expire, Slurm's least: also the time a job step's credential stays valid, ample
# on one node), and pending jobs are tried every second (the main scheduler and the backfill one,
# else every 60 and 30 s), so that one whose start time has come starts within the second.
set -euo pipefail

CONF_DIR=/etc/slurm
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm

stop() {  # each daemon by the pid its own pid file names
  local pidfile pid
  for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
  done
}

if [ "${1:-start}" = stop ]; then stop; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "slurm_cluster.sh: must run as root" >&2; exit 1; fi
for tool in munged slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || { echo "slurm_cluster.sh: $tool not installed (apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge)" >&2; exit 1; }
done
stop

# munge: the key readable by its user only, the daemon started as that user.
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
runuser -u munge -- munged --force

node=$(hostname -s)
cpus=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
memory=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
cpus=${SLURM_CPUS:-$cpus}
rm -rf "$STATE" "$SPOOL"
mkdir -p "$CONF_DIR" "$STATE" "$SPOOL" "$LOGS"
cat > "$CONF_DIR/slurm.conf" <<EOF
ClusterName=local
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=5
SchedulerParameters=sched_interval=1,bf_interval=1
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=3600
KillWait=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
echo 'include /etc/slurm/plugstack.conf.d/*.conf' > "$CONF_DIR/plugstack.conf"
mkdir -p "$CONF_DIR/plugstack.conf.d"

slurmctld
slurmd
for _ in $(seq 100); do
  if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
    echo "slurm_cluster.sh: node $node idle ($cpus CPUs, $memory MB), partition debug"
    exit 0
  fi
  sleep 0.2
done
echo "slurm_cluster.sh: the node did not come up; $LOGS/slurmctld.log and slurmd.log say why" >&2
sinfo >&2 || true
exit 1
