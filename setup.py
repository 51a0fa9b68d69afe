"""Nightly retraining pipeline for a multimodal CTR recommender on Apache Airflow 3."""
from setuptools import find_packages, setup

COMMON = ["pyyaml>=6", "numpy>=1.26", "pyarrow>=18", "fsspec>=2024.6"]
# The DAG side: scheduler, API server, DAG processor. No TensorFlow or Beam: the DAG file parses
# without them (tests/test_environment.py installs it alone), and task bodies import them lazily.
AIRFLOW = [
    "apache-airflow>=3.3,<4",
    "apache-airflow-providers-cncf-kubernetes>=10",
]
# `make airflow-celery` and the live-Airflow tests: CeleryExecutor on Redis, PostgreSQL (sync + async drivers).
CELERY = ["apache-airflow-providers-celery>=3.10", "psycopg2-binary>=2.9", "asyncpg>=0.29", "redis>=5"]
# The steps' bodies: Beam + tf.Transform preprocessing, training, evaluation, push. No Airflow.
WORKER = [
    "tensorflow>=2.21,<2.22",
    "tf-keras>=2.21,<2.22",
    "tensorflow-transform>=1.21,<1.22",
    "tfx-bsl>=1.21,<1.22",
    "apache-beam[gcp]>=2.77,<2.78",
    "tensorflow-serving-api>=2.19,<2.22",   # tfx-bsl 1.21 caps it below 2.20
    "tensorboard>=2.21,<2.22",              # the `tensorboard --logdir` the demo prints
    "scikit-learn>=1.5",
    "matplotlib>=3.8",
    "jinja2>=3.1",
    "psutil>=5.9",
    "kubernetes>=29",                       # the training launcher pod's API client (kube_client.py)
    # data.artifact_store: s3:// (pipeline/storage.py mirrors each step's outputs where the step runs);
    # tested against Swift's S3 API (tests/pipeline/test_s3_store.py). gs:// needs gcsfs beside it.
    "s3fs>=2024.6",
]
# Polars: its writer's default output is one of the encodings the raw contract is tested against.
# grpcio-tools: protoc for the TF Serving protos vendored in docker/serving/protos (the configs'
# test); 1.76: the releases after it need setuptools >= 77 (1.78-1.80) or protobuf 7 (1.84 on).
DEV = ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.6", "ruff>=0.5", "polars>=1.0",
       "grpcio-tools>=1.76,<1.77"]

setup(
    name="reco-nightly",
    version="0.1.0",
    description="Nightly retraining of a multimodal CTR recommender: Airflow 3, Beam + tf.Transform, "
    "multi-worker TensorFlow, TF Serving push.",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["pipeline", "pipeline.*", "components", "components.*", "airflow_glue"]),
    package_data={"components.evaluate": ["templates/*.html.j2"]},
    # `pipeline/` (config, contracts, DAG-side orchestration) needs only these; each side adds its extra.
    install_requires=COMMON,
    extras_require={"airflow": AIRFLOW, "celery": CELERY, "worker": WORKER, "dev": DEV},
    entry_points={
        "console_scripts": [
            "reco-generate-data=pipeline.datagen.cli:main",
        ],
        # The DAG's timetable (run ids that name the data date): airflow_glue/plugin.py.
        "airflow.plugins": ["recommender = airflow_glue.plugin:RecommenderPlugin"],
    },
)
