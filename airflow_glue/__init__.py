"""The Airflow side of the pipeline: what only the DAG and Airflow's own processes load.

The forced-push approval (a Human-in-the-loop operator), the data-landed sensor and its trigger,
the served-model asset, the Kubernetes pod operators and the DAG's timetable (registered as an
Airflow plugin by setup.py's entry point). `pipeline/` and `components/` never import this
package (tests/test_imports.py): they stay plain Python, runnable by the CLI, the tests and pods
without Airflow.
"""
