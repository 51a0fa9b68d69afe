"""Preprocess step: raw Parquet -> validated, tf.Transform-ed, balanced TFRecord shards.

Entry point: `run(config, paths, beam_args=()) -> PreprocessResult` (CLI: `python -m
components.preprocess --date YYYY-MM-DD [--run-id ID] [--config FILE] [beam flags...]`).

Output layout (published atomically; complete iff examples_dir/manifest.json exists):

    paths.examples_dir/                  run_dir/examples
        train/part-00000-of-000NN.tfrecord   NN = workers x readers_per_worker x shard_multiple
        eval/part-00000-of-000MM.tfrecord    MM = workers x readers_per_worker
        manifest.json        counts per split, shards (name, examples, bytes, sha256), the
                             max/min byte imbalance, by_worker {"0": [shard names], ...}
                             (worker i reads shards i, i+W, ...), feature_spec, compression,
                             transform_fingerprint (sha256 of transform_fn/saved_model.pb)
    paths.transform_dir/                 run_dir/transform (tft.TFTransformOutput)
        transform_fn/  transformed_metadata/
    paths.validation_dir/rows.json       row-level counts per reason and split
    paths.validation_dir/rejected/rejected.jsonl   one JSON line per rejected row + reason

Examples (uncompressed unless preprocess.compression = "GZIP") are tf.Examples with
title_ids int64[title_len], image float32[2048], history_ids int64[history_len], label int64;
0 is padding in the id features (see transform.py). Read them with
`pipeline.contracts.manifest.shard_files(dir, "train", worker=i)` and the spec of
`pipeline.contracts.features.transformed_feature_spec(model)`.
"""
from components.preprocess.run import pipeline_options, run

__all__ = ["pipeline_options", "run"]
