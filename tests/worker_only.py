"""Import names of what only the `[worker]` extra installs: the DAG side must never need them."""

WORKER_ONLY_MODULES = ("tensorflow", "tf_keras", "tensorflow_transform", "tfx_bsl", "apache_beam", "tensorboard",
                       "tensorflow_serving", "sklearn", "matplotlib")
