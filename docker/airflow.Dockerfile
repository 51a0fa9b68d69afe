# Airflow image. Default (EXTRAS=airflow): scheduler, API server and DAG processor of a Celery or
# Kubernetes-executor deployment, with no TensorFlow or Beam (the DAG files import only
# `pipeline` and `airflow_glue`). An image that also executes the step bodies (docker-compose.yml's Celery workers)
# is built with EXTRAS=airflow,celery,worker.
FROM apache/airflow:3.3.2-python3.11
ARG EXTRAS=airflow

USER root
RUN apt-get update && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
USER airflow

WORKDIR /opt/reco
COPY --chown=airflow:root constraints.txt setup.py ./
COPY --chown=airflow:root pipeline ./pipeline
COPY --chown=airflow:root components ./components
COPY --chown=airflow:root airflow_glue ./airflow_glue
RUN pip install --no-cache-dir -c constraints.txt -e ".[${EXTRAS}]"
COPY --chown=airflow:root conf ./conf
COPY --chown=airflow:root dags ./dags
COPY --chown=airflow:root scripts ./scripts

ENV PYTHONPATH=/opt/reco \
    TF_USE_LEGACY_KERAS=1 \
    RECO_CONFIG=/opt/reco/conf/params.yaml \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/reco/dags \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
