"""Pure-Python shared code of the nightly recommender pipeline.

Config, paths, feature names and typed step results. This package never imports
TensorFlow or Apache Beam, so Airflow can parse DAG files that use it in milliseconds.
"""
