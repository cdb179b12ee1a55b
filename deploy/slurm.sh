#!/bin/bash
# A study on a SLURM allocation, following Ray's documented pattern (https://docs.ray.io/en/latest/cluster/vms/
# user-guides/community/slurm.html): `ray start --head` on the first node, `ray start --address` on the others (one
# srun step each, --block), then the driver on the head node's allocation.
#
#   sbatch deploy/slurm.sh quickstart /shared/bisweep     # study, and storage every node reads (a shared path)
#   bisweep report quickstart --storage /shared/bisweep    # anywhere that sees the path, later
#
# Each node gives Ray the CPUs (and GPUs) SLURM gave its task; trials of a study with `resources: {gpu: 1}` go
# to the GPUs. Nodes authenticate with a token made for this job. A node SLURM takes back mid-study: its trials
# start again on the others from their last checkpoint under the storage path.
#SBATCH --job-name=bisweep
#SBATCH --nodes=3
#SBATCH --exclusive
#SBATCH --tasks-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --gpus-per-task=0
#SBATCH --time=04:00:00
set -euo pipefail

study=${1:?usage: sbatch deploy/slurm.sh STUDY STORAGE}
storage=${2:?usage: sbatch deploy/slurm.sh STUDY STORAGE}
gpus=${SLURM_GPUS_PER_TASK:-0}

export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$(python -c "import secrets; print(secrets.token_hex(32))")
export RAY_AUTH_TOKEN

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node=${nodes[0]}
head_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{print $1}')
port=6379
address=$head_ip:$port

echo "starting the Ray head at $address"
srun --nodes=1 --ntasks=1 -w "$head_node" \
  ray start --head --node-ip-address="$head_ip" --port=$port \
  --num-cpus "$SLURM_CPUS_PER_TASK" --num-gpus "$gpus" --disable-usage-stats --block &
sleep 10

for node in "${nodes[@]:1}"; do
  echo "starting a Ray worker on $node"
  srun --nodes=1 --ntasks=1 -w "$node" \
    ray start --address "$address" \
    --num-cpus "$SLURM_CPUS_PER_TASK" --num-gpus "$gpus" --disable-usage-stats --block &
  sleep 5
done

bisweep run "$study" --address "$address" --storage "$storage" --results-dir "results/$study"
