"""The example launchers checked offline: the AWS and GCP cluster files against Ray's own schema (with a GPU node
type on a GPU image), the KubeRay RayJob against the fields KubeRay's CRD requires, and the SLURM script run with
SLURM's and Ray's commands replaced by stubs that write down what they were asked."""
import copy
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"


def bisweep_args(words):
    """`bisweep ...` as bisweep's own parser reads it (a typo in an option fails here)."""
    from sweep.cli import parser

    assert words[0] == "bisweep"
    return parser().parse_args(words[1:])


@pytest.mark.parametrize("name", ["cluster.yaml", "deploy/gcp.yaml"])
def test_the_cloud_files_pass_rays_checks_with_a_gpu_node_type_on_a_gpu_image(name, capsys):
    import ray
    from ray.autoscaler._private.util import prepare_config, validate_config

    from sweep.cli import main

    raw = yaml.safe_load((REPO / name).read_text())
    validate_config(prepare_config(copy.deepcopy(raw)))  # what `ray up` does before any cloud call
    gpu = raw["available_node_types"]["gpu_worker"]
    assert gpu["resources"]["GPU"] == 1 and gpu["docker"]["worker_image"] == f"rayproject/ray:{ray.__version__}-py311-gpu"
    assert raw["docker"]["image"] == f"rayproject/ray:{ray.__version__}-py311-cpu"
    assert main(["cluster", "check", str(REPO / name)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == ("bisweep: not checked (offline): credentials and the nodes' access to --storage, that the region, "
                       "zones and project exist and have quota for these instance types, and that the docker images "
                       "can be pulled")
    header = [line[1:].strip() for line in (REPO / name).read_text().splitlines() if line.startswith("#")]
    runs = [line.split('"')[1] for line in header if line.startswith("ray exec")]
    assert runs and all(bisweep_args(shlex.split(r.split("&& ", 1)[1])).storage for r in runs)  # results kept


def test_a_gpu_node_type_on_a_cpu_image_is_one_line(tmp_path, capsys):
    from sweep.cli import main

    raw = yaml.safe_load((REPO / "cluster.yaml").read_text())
    raw["available_node_types"]["gpu_worker"]["docker"]["worker_image"] = "rayproject/ray:2.60.0-py311-cpu"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    assert main(["cluster", "check", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"bisweep: error: {bad}: available_node_types.gpu_worker: has GPUs but runs the CPU-only image "
        "rayproject/ray:2.60.0-py311-cpu; give it a GPU image (docker.worker_image: rayproject/ray:<version>-py311-gpu)"]


def test_the_kuberay_rayjob_has_what_kuberays_crd_requires_and_a_bisweep_entrypoint():
    """Required fields as KubeRay's ray.io/v1 RayJob CRD states them (helm-chart/kuberay-operator/crds/
    ray.io_rayjobs.yaml): rayClusterSpec requires headGroupSpec, which requires template; a worker group requires
    groupName, minReplicas, maxReplicas and template; authOptions.mode is disabled or token. A pod template
    needs containers with a name and an image (Kubernetes' PodSpec)."""
    import ray

    job = yaml.safe_load((DEPLOY / "kuberay-rayjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob") and job["metadata"]["name"]
    spec = job["spec"]
    args = bisweep_args(shlex.split(spec["entrypoint"]))
    assert args.command == "run" and args.storage.startswith("s3://") and args.address is None  # RAY_ADDRESS
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == ray.__version__ and cluster["authOptions"]["mode"] in ("disabled", "token")
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # no trial beside the driver
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    for pod in [cluster["headGroupSpec"], *groups.values()]:
        containers = pod["template"]["spec"]["containers"]
        assert containers and all(c["name"] and c["image"] for c in containers)
        assert all(isinstance(v, str) for v in pod.get("rayStartParams", {}).values())  # the CRD: strings
    for g in groups.values():
        assert 0 <= g["minReplicas"] <= g["replicas"] <= g["maxReplicas"]
    assert groups["gpu"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


STUB = """#!/bin/bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
"""
SRUN = """#!/bin/bash
echo "srun $*" >> "$STUB_LOG"
while [[ $1 == -* ]]; do [[ $1 == -w ]] && shift; shift; done
if [[ $1 == hostname ]]; then echo "10.1.2.3 fe80::1"; else "$@"; fi
"""
BISWEEP = """#!/bin/bash
echo "bisweep $* auth=$RAY_AUTH_MODE token=${#RAY_AUTH_TOKEN}" >> "$STUB_LOG"
"""


def test_the_slurm_script_starts_ray_as_rays_slurm_guide_does_then_the_study(tmp_path):
    assert subprocess.run(["bash", "-n", str(DEPLOY / "slurm.sh")]).returncode == 0
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in {"srun": SRUN, "ray": STUB, "sleep": STUB, "bisweep": BISWEEP,
                       "scontrol": "#!/bin/bash\nprintf 'n1\\nn2\\nn3\\n'\n"}.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    log = tmp_path / "log"
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(log), "SLURM_JOB_NODELIST": "n[1-3]",
           "SLURM_CPUS_PER_TASK": "8", "SLURM_GPUS_PER_TASK": "1"}
    run = subprocess.run(["bash", str(DEPLOY / "slurm.sh"), "quickstart", "/shared/bisweep"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    # the workers' steps run in the background, as the head's: their lines come in any order
    lines = sorted(line for line in log.read_text().splitlines() if not line.startswith(("srun", "sleep")))
    assert lines == [
        "bisweep run quickstart --address 10.1.2.3:6379 --storage /shared/bisweep --results-dir results/quickstart "
        "auth=token token=64",
        "ray start --address 10.1.2.3:6379 --num-cpus 8 --num-gpus 1 --disable-usage-stats --block",
        "ray start --address 10.1.2.3:6379 --num-cpus 8 --num-gpus 1 --disable-usage-stats --block",
        "ray start --head --node-ip-address=10.1.2.3 --port=6379 --num-cpus 8 --num-gpus 1 --disable-usage-stats --block",
    ]
    srun = [line for line in log.read_text().splitlines() if line.startswith("srun") and "ray start" in line]
    assert sorted(line.split(" -w ")[1].split()[0] for line in srun) == ["n1", "n2", "n3"]  # one node each
    args = bisweep_args(lines[0].split(" auth=")[0].split())
    assert (args.study, args.address, args.storage) == ("quickstart", "10.1.2.3:6379", "/shared/bisweep")
    missing = subprocess.run(["bash", str(DEPLOY / "slurm.sh")], env=env, capture_output=True, text=True)
    assert missing.returncode != 0 and "usage: sbatch deploy/slurm.sh STUDY STORAGE" in missing.stderr
