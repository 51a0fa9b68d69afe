"""The contracts every step shares, defined once, in pure Python (no TensorFlow, no Beam).

- `features`: column and feature names, shapes, the transformed feature spec, vocab file names;
- `raw`: the raw tables' Arrow types, their accepted encodings, and `normalize`;
- `inputs`: which partitions and items snapshot a run reads, footers read once, schema check;
- `rows`: the row rules (reasons, history truncation) preprocess and evaluate both apply;
- `manifest`: the preprocess output (manifest format, publish/recover, the sharding rule);
- `signature`: serving signature and output names, request padding;
- `serving`: the TF Serving directory layout (versions, push records, history, digests);
- `evaluation`: the evaluation outputs and the BLESSED / NOT_BLESSED markers.

Components import these, never each other's internals (tests/test_imports.py checks it).
Import the module you need: this package imports none of them, so the light ones stay light.
"""
