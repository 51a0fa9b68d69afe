"""The Kubernetes backend: the same worker command and env as TFJob or Indexed Job manifests.

manifests.py renders them (pure dicts, validated against the API's models in tests),
submit.py creates them and supervises the gang like the local launcher, client.py is the one
place that talks to the API server, cli.py prints the launcher's RBAC objects.
Never imports TensorFlow, the model or the worker; shares `gang.worker_spec`, `gang.heartbeat`
and the launcher's errors with the local backend (rule enforced by tests/test_imports.py).
"""
