"""Heavy steps as KubernetesPodOperator tasks, for `execution.backend: kubernetes`.

Every step that imports TensorFlow or Beam (preprocess, train, evaluate, push) is a pod: the
Airflow image has the `[airflow]` extra only. The pods run the same CLIs as local runs
(`python -m components.<step>`) from the worker image, with the run's data date, its config
(fixed by resolve_run) and form overrides templated in from the `resolve_run` XCom, and hand
their typed result back through the XCom sidecar (`--result-json /airflow/xcom/return.json`).
The provider is imported only when this backend is selected: it costs seconds at parse time.
"""
from __future__ import annotations

from typing import Any

from pipeline.config import Config

RUN_DATE = "{{ ti.xcom_pull(task_ids='resolve_run')['run_date'] }}"
OVERRIDES = "{{ ti.xcom_pull(task_ids='resolve_run')['overrides'] | tojson }}"
RUN_CONFIG = "{{ ti.xcom_pull(task_ids='resolve_run')['config'] | tojson }}"   # pipeline/run_config.py
XCOM_RESULT = "/airflow/xcom/return.json"


def step_arguments(extra: tuple[str, ...] | list[str] = (), overrides: str = OVERRIDES) -> list[str]:
    return ["--date", RUN_DATE, "--run-id", "{{ run_id }}", "--run-config-json", RUN_CONFIG,
            "--overrides-json", overrides, "--result-json", XCOM_RESULT, *extra]


def step_env(config: Config) -> dict[str, str]:
    """Data roots as the pods see them (shared storage mounted at the same paths)."""
    return {
        "TF_USE_LEGACY_KERAS": "1",
        "RECO__DATA__RAW_ROOT": str(config.data.raw_root),
        "RECO__DATA__ARTIFACT_ROOT": str(config.data.artifact_root),
        "RECO__DATA__STAGING_ROOT": str(config.data.staging_root),
        "RECO__DATA__SERVING_BASE": str(config.data.serving_base),
    }


def shared_volumes(config: Config, raw: bool = False, serving: str = "") -> tuple[list, list]:
    """(volumes, mounts): the artifact store (and, for preprocess, the raw data read-only; with
    `serving` "ro"/"rw", TF Serving's model base) at the paths the config names, so a pod sees
    every RunPaths path where a local run does."""
    from kubernetes.client import models as k8s

    claims = [("artifacts", config.execution.k8s_artifacts_pvc, config.data.artifact_root, False)]
    if raw:
        claims.append(("raw", config.execution.k8s_raw_pvc, config.data.raw_root, True))
    if serving:
        claims.append(("serving", config.execution.k8s_serving_pvc, config.data.serving_base, serving == "ro"))
    volumes = [k8s.V1Volume(name=name, persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
        claim_name=claim, read_only=read_only)) for name, claim, _, read_only in claims]
    mounts = [k8s.V1VolumeMount(name=name, mount_path=str(path), read_only=read_only)
              for name, _, path, read_only in claims]
    return volumes, mounts


def pod_step(task_id: str, module: str, config: Config, extra_args=(), raw: bool = False, serving: str = "",
             overrides: str = OVERRIDES, subcommand: tuple[str, ...] = (), **task_kwargs: Any):
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    volumes, mounts = shared_volumes(config, raw, serving)
    return KubernetesPodOperator(
        volumes=volumes,
        volume_mounts=mounts,
        task_id=task_id,
        name=f"reco-{task_id}",
        namespace=config.execution.namespace,
        image=config.execution.image,
        cmds=["python", "-m", module],
        arguments=[*subcommand, *step_arguments(extra_args, overrides)],
        env_vars=step_env(config),
        labels={"app": "reco-nightly", "step": task_id},
        do_xcom_push=True,
        get_logs=True,
        on_finish_action="delete_pod",
        **task_kwargs,
    )


def preprocess_pod(config: Config, **task_kwargs: Any):
    """The Beam launcher pod: the pipeline itself runs on the runner named in the Beam flags."""
    beam = [f"--runner={config.preprocess.runner}", *config.preprocess.beam_args]
    return pod_step("preprocess", "components.preprocess", config, beam, raw=True, **task_kwargs)


def train_pod(config: Config, **task_kwargs: Any):
    """The gang launcher pod: submits the worker manifests and supervises them (all or none), with
    the service account whose Role allows exactly that; reads the chief's result from the store."""
    return pod_step("train", "components.train", config, ["--backend", "kubernetes"],
                    service_account_name=config.execution.k8s_service_account, **task_kwargs)


def evaluate_pod(config: Config, **task_kwargs: Any):
    """The gate's evaluation against the served version (read-only serving volume); NOT_BLESSED
    is a result, not a failure (`--exit-zero`): the gate task reads it from the XCom."""
    return pod_step("evaluate", "components.evaluate", config, ["--exit-zero"], serving="ro", **task_kwargs)


def push_pod(config: Config, overrides_task_id: str, **task_kwargs: Any):
    """The atomic publish into TF Serving's model base. Its overrides come from
    `overrides_task_id` (the run's, plus a forced push's approved reason); a skipped push is a
    result (`--exit-zero`)."""
    overrides = "{{ ti.xcom_pull(task_ids='" + overrides_task_id + "') | tojson }}"
    return pod_step("push", "components.push", config, ["--exit-zero"], serving="rw", overrides=overrides,
                    subcommand=("push",), **task_kwargs)
