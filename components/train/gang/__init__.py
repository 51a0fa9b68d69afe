"""The local backend: training workers as processes on this host, supervised all-or-none.

worker_spec.py is what every worker is given (module, env, TF_CONFIG, arguments), locally or in
a pod; launcher.py starts, watches and stops a gang of processes; netns.py gives a gang a private
network (a namespace with only a loopback) so TF's gRPC servers are reachable from the gang only;
heartbeat.py is the worker's progress file and the launchers' deadline on it; lab.py the
benchmark-only options a gang's workers inherit; local.py wires them for `run`.
Pure Python: never imports TensorFlow, the model or the worker (rule enforced by
tests/test_imports.py), so the launching task stays light.
"""
