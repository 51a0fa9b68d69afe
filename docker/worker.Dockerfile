# Training/preprocessing worker image for the Kubernetes backend: TensorFlow with CUDA for GPUs.
# The same `python -m components.train.worker` entry point as local runs; NCCL collectives and
# mixed precision switch on when GPUs are visible.
FROM tensorflow/tensorflow:2.21.0-gpu

WORKDIR /opt/reco
COPY constraints.txt setup.py ./
COPY pipeline ./pipeline
COPY components ./components
RUN pip install --no-cache-dir -c constraints.txt -e ".[worker]"     # no Airflow in this image
COPY conf ./conf

ENV PYTHONPATH=/opt/reco \
    TF_USE_LEGACY_KERAS=1 \
    RECO_CONFIG=/opt/reco/conf/params.yaml
ENTRYPOINT ["python", "-m"]
CMD ["components.train.worker", "--help"]
