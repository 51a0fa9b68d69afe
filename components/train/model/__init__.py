"""What is trained: the CTR model's architectures and the layers and optimizer they need.

build.py builds and compiles (din.py the default, reference.py the seed's), embedding.py and
sparse_gather.py keep embedding tables sparse under MWMS, optimizers.py is the lazy Adam,
calibration.py the Platt layer, vocab.py the tables' sizes. Imports TensorFlow and
`pipeline` only: nothing here knows about processes, files of a run or launchers (rule
enforced by tests/test_imports.py).
"""
