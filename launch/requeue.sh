# The requeue-on-signal logic of capsim's SLURM scripts, written once: launch/slurm.sbatch
# sources this file, and the grid's array script (launch.slurm) holds a copy of it, so
# that the script a user resubmits by hand needs nothing beside it.
#
# run_requeued COMMAND...: runs COMMAND in the background (its output appended to $LOG
# when LOG is set) and waits for it. SIGUSR1 (asked for with --signal=B:USR1@S before the
# time limit) and SIGTERM (a preemption, a requeue, scancel) both reach COMMAND as
# SIGTERM: the trainers save at one step and exit 0 (capsim.train.faults). After SIGUSR1,
# while a folder of JOB_DIRS has no results.json, the script requeues its own job with
# `scontrol requeue`, at most MAX_REQUEUES times (default 3); then it ends as failed. A
# preemption's SIGTERM saves the same way and SLURM requeues the job itself. A command that
# fails is never requeued. The script ends with COMMAND's status.
starts=$((${SLURM_RESTART_COUNT:-0} + 1))
time_limit_near=0
child=""
trap 'time_limit_near=1; echo "== time limit near: saving"; [[ -n $child ]] && kill -TERM "$child"' USR1
trap 'echo "== SIGTERM: saving"; [[ -n $child ]] && kill -TERM "$child"' TERM

run_requeued() {
  if [[ -n ${LOG:-} ]]; then
    echo "== output: $LOG"
    mkdir -p "$(dirname "$LOG")"
    "$@" >> "$LOG" 2>&1 &
  else
    "$@" &
  fi
  child=$!
  while kill -0 "$child" 2> /dev/null; do wait "$child"; done
  wait "$child"
  local status=$?
  local unfinished=0 dir max_requeues=${MAX_REQUEUES:-3}
  for dir in "${JOB_DIRS[@]}"; do
    [[ -f "$dir/results.json" ]] || unfinished=$((unfinished + 1))
  done
  echo "== exit $status; $unfinished of ${#JOB_DIRS[@]} jobs unfinished"
  # exit 0: the trainers saved; 143 (SIGTERM's death): the signal came before the trainer
  # took SIGTERM over (at start-up), so its last checkpoint stands and a rerun resumes it
  if ((time_limit_near && (status == 0 || status == 143) && unfinished > 0)); then
    if ((starts <= max_requeues)); then
      echo "== requeued to resume (start $((starts + 1)) of at most $((max_requeues + 1)))"
      scontrol requeue "$SLURM_JOB_ID"
    else
      echo "== not requeued: started $starts times (at most $max_requeues requeues)"
      exit 1
    fi
  fi
  exit "$status"
}
