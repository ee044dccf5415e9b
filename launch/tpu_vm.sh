#!/usr/bin/env bash
# Train on every worker of a Cloud TPU VM (a single host or a pod slice).
#
#   launch/tpu_vm.sh TPU_NAME ZONE CONFIG[:ARG] WORKDIR [TRAINER FLAG ...]
#   launch/tpu_vm.sh my-v4-32 us-central2-b configs/coco_gru.py:data_dir=/mnt/data /mnt/runs/coco_gru
#   MODULE=i2ce_jax.train launch/tpu_vm.sh my-v5e-8 us-west4-a \
#       configs/i2ce_coco_margin.py:data_dir=/mnt/data /mnt/runs/margin --config.model.dtype=bfloat16
#
# Flags after WORKDIR go to the trainer unchanged (quoted for the remote shell).
# Each worker clones (or updates) the repository, installs it with JAX's TPU
# wheels, then all workers start the same training command at once. On a pod
# slice, jax.distributed.initialize() finds the other workers by itself
# (capsim.mesh.maybe_initialize_distributed sees TPU_WORKER_HOSTNAMES).
# WORKDIR and the config's data_dir must be one folder that every worker sees
# at the same path (Filestore/NFS or a gcsfuse mount): checkpoints are written
# through local paths, so gs:// URLs do not work.
#
# Environment: MODULE (vtfn_jax.train or i2ce_jax.train; default vtfn_jax.train),
# REPO_URL, BRANCH (default main), PYTHON (a Python 3.11 on the workers; default
# python3). Untested here: written without access to a TPU.
set -euo pipefail

if [[ $# -lt 4 ]]; then
  echo "usage: $0 TPU_NAME ZONE CONFIG[:ARG] WORKDIR [TRAINER FLAG ...]" >&2
  exit 2
fi
TPU_NAME=$1
ZONE=$2
CONFIG=$3
WORKDIR=$4
MODULE=${MODULE:-vtfn_jax.train}
REPO_URL=${REPO_URL:-https://github.com/capsim-dev/capsim}
BRANCH=${BRANCH:-main}
PYTHON=${PYTHON:-python3}
TRAINER_FLAGS=""
if [[ $# -gt 4 ]]; then
  TRAINER_FLAGS=$(printf ' %q' "${@:5}")
fi

on_all_workers() {
  gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" --worker=all --command="$1"
}

on_all_workers "set -e
  [ -d capsim ] || git clone --quiet --branch '$BRANCH' '$REPO_URL' capsim
  cd capsim && git fetch --quiet origin && git checkout --quiet '$BRANCH' && git pull --quiet --ff-only
  $PYTHON -m pip install --quiet -e '.[all]' 'jax[tpu]>=0.10.0,<0.13'"

on_all_workers "cd capsim && $PYTHON -m '$MODULE' --config='$CONFIG' --workdir='$WORKDIR'$TRAINER_FLAGS"
